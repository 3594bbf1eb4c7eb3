"""A paste as people post it: in a Markdown code block (indented, fenced, fenced inside a list),
with Windows line ends, under a shell prompt. None of it may change what is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.jsonable import jsonable
from doctor.facts.node import parse_node
from doctor.paste.split import unindent
from tests.paste.pastekit import PASTES, read_text

NVIDIA = Path(__file__).parent.parent / "fixtures" / "nvidia"
# Every fixture a kind reads (lscpu.txt is read by none); the NVIDIA outputs too.
FIXTURES = sorted(
    [p for p in PASTES.glob("*.txt") if p.name != "lscpu.txt"]
    + [NVIDIA / n for n in ("smi-q.txt", "smi-table-classic.txt", "proc-version-open.txt")]
)


def _indented(text: str, margin: str) -> str:
    return "".join(margin + line if line.strip() else line for line in text.splitlines(True))


def _variants(text: str) -> dict[str, str]:
    return {
        "4 spaces, prose around": "On gpu1 I get:\n\n" + _indented(text, "    ") + "\nThanks!\n",
        "a tab": _indented(text, "\t"),
        "fenced": "``` shell {.output}\n" + text + "```\n",
        "tilde-fenced": "~~~\n" + text + "~~~\n",
        "fenced in a list": "1. output:\n\n   ```console\n" + _indented(text, "   ") + "   ```\n",
        "CRLF under a root prompt": ("root@gpu1:~# cmd\n" + text).replace("\n", "\r\n"),
        "indented under a prompt": "$ cmd\n" + _indented(text, "    "),
        "indented under its introduction": "Here it is:\n" + _indented(text, "  "),
    }


def _facts(text: str) -> dict:
    """The node's facts (a segment's stored text may keep the prose after it: facts may not)."""
    facts = jsonable(parse_node("n1", read_text(text)))
    return {k: v for k, v in facts.items() if k != "capture"}


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_a_paste_in_markdown_reads_as_the_plain_one(fixture: Path) -> None:
    text = fixture.read_text()
    plain = _facts(text)
    for how, variant in _variants(text).items():
        assert _facts(variant) == plain, how


def test_indentation_inside_an_output_is_kept() -> None:
    # ifconfig's addresses are indented under a name at the margin: not a code block.
    lines = ["eth0: flags=4163<UP>  mtu 1500", "        inet 10.0.0.2", "", "lo: flags=73<UP>"]
    assert unindent(lines) == lines
    # Indented as a whole, each block loses only the margin they share.
    assert unindent(["", *("    " + line if line else "" for line in lines)]) == ["", *lines]
    # Line numbers stay: fence lines become blank lines.
    assert unindent(["```", "  a", "    b", "```"]) == ["", "a", "  b", ""]
