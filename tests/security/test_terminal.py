"""Text from outside is shown, never obeyed: every renderer, drawn text with control characters
in every field (a finding's summary, evidence, fix, a node failure, a section's keys and values).

The terminal gets no control character but rich's own styles; the JSON keeps the text exact; the
JUnit XML stays well-formed; the Markdown holds no raw HTML, no control character, and no line
that closes its code fence or splits its table rows; the HTML has no tag from the text.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from builders import build_report, node
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.model import Finding, Fix, NodeFailure, Severity
from doctor.core.printable import UNSAFE, printable
from doctor.core.shell import command
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.plugin import node_check
from doctor.render.explain import render_explain_text
from doctor.render.html import render_html
from doctor.render.junit import render_junit
from doctor.render.markdown import render_markdown
from doctor.render.output import safe_console
from doctor.render.terminal import render_text

CONTROLS = "\x00\x07\x08\x0b\x0c\r\x1b\x7f\x85\x90\x9b\x9c\u202e\u2066"
HOSTILE = st.text(
    alphabet=st.sampled_from([*CONTROLS, "]", "[", ";", "8", "0", "<", ">", "|", "`", "a", " "]),
    max_size=30,
) | st.sampled_from(
    [
        "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
        "\x1b]0;owned\x07",
        "\x1bP+q\x1b\\",
        "<img src=x onerror=alert(1)>",
        "```\nrm -rf /\n```",
        "a | b | c",
        "[link=http://x]y[/link] [/bad]",
    ]
)
# rich's own styles: SGR sequences, and the hyperlinks it writes for no text of ours.
RICH_SGR = re.compile(r"\x1b\[[0-9;]*m")


class Drawn:
    text = ""


@node_check("test.hostile", "Quotes what a node said", codes={"test.hostile": "quoted"})
def hostile(facts: NodeFacts) -> Iterator[Finding]:
    yield Finding(
        "test.hostile",
        Severity.FAIL,
        f"node said {Drawn.text}",
        evidence=(Drawn.text, f"{Drawn.text} again"),
        fix=Fix(f"do {Drawn.text}", (command("echo {}", Drawn.text),)),
        data={Drawn.text: Drawn.text},
    )


def _report(text: str) -> tuple[str, object]:
    Drawn.text = text
    cluster = ClusterFacts(nodes={"gpu01": node("gpu01")})
    cluster.failures["gpu02"] = NodeFailure("gpu02", "node.timeout", f"timed out: {text}", text)
    report = build_report(cluster, [hostile], {"odd": {text or "k": {"v": text}}})
    return text, report


def _terminal(report: object, colour: bool) -> str:
    out = io.StringIO()
    console = safe_console(out, width=120, force_terminal=colour, color_system="truecolor")
    for detail in ("quiet", "normal", "verbose"):
        render_text(report, console, detail)  # type: ignore[arg-type]
    return out.getvalue()


@settings(max_examples=60)
@given(HOSTILE)
def test_every_renderer(text: str) -> None:
    text, report = _report(text)
    for colour in (False, True):
        shown = RICH_SGR.sub("", _terminal(report, colour))
        assert not UNSAFE.search(shown), repr(shown)
    doc = report.to_json()  # type: ignore[attr-defined]
    exact = json.loads(json.dumps(doc))
    summaries = [f["summary"] for f in exact["findings"]]
    assert f"node said {text}" in summaries  # the JSON keeps the text as it was
    ET.fromstring(render_junit(report).encode())  # type: ignore[arg-type]
    markdown = render_markdown(report)  # type: ignore[arg-type]
    assert not UNSAFE.search(markdown)
    lines = markdown.splitlines()
    fences = [i for i, ln in enumerate(lines) if ln.startswith("```")]
    prose = [ln for i, ln in enumerate(lines) if not any(a <= i <= b for a, b in _pairs(fences))]
    assert not any("<img" in ln for ln in prose)  # in a code block it is shown as code
    assert len(fences) % 2 == 0
    page = render_html(doc)
    assert "<img src=x onerror" not in page and "\x1b" not in page.replace("\\x1b", "")


def _pairs(fences: list[int]) -> list[tuple[int, int]]:
    return list(zip(fences[::2], fences[1::2], strict=True))


def test_a_table_row_keeps_its_columns() -> None:
    _, report = _report("a | b | c")
    markdown = render_markdown(report)  # type: ignore[arg-type]
    rows = [ln for ln in markdown.splitlines() if ln.startswith("| ") and "b \\|" in ln]
    assert rows and all("a \\| b \\| c" in row for row in rows)  # escaped in every table


def test_a_code_fence_is_not_closed_by_the_text() -> None:
    _, report = _report("```\nrm -rf /\n```")
    markdown = render_markdown(report)  # type: ignore[arg-type]
    assert "rm -rf /" not in [ln.strip() for ln in markdown.splitlines()]  # never its own line


def test_explain_shows_a_log_line_and_a_file_name(tmp_path: Path) -> None:
    from doctor.explain.scan import explain

    name = tmp_path / "rank\x1b]0;t\x07.log"
    name.write_bytes(
        b"NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12 "
        b"\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\ \xc2\x9b2J\n"
    )
    out = io.StringIO()
    render_explain_text(explain([str(name)]), safe_console(out, width=200))
    text = out.getvalue()
    assert not UNSAFE.search(text)
    # Shown escaped; rich drops BEL, BS, VT, FF and CR from the text it styles (not emitted).
    assert "\\x1b]8;;http://evil" in text and "rank\\x1b]0;t" in text


@given(st.text())
def test_escaping_is_idempotent_and_total(text: str) -> None:
    once = printable(text)
    assert printable(once) == once and not UNSAFE.search(once)
