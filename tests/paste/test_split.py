"""The splitter: several outputs in one paste, prompts, and outputs no kind knows."""

from __future__ import annotations

from doctor.paste import KINDS
from doctor.paste.kind import Kind
from doctor.paste.split import split
from tests.paste.pastekit import pasted

# A stand-in for a kind another module adds (the NVIDIA kinds): its banner opens its segment.
SMI = Kind("smi-banner", lambda line: "NVIDIA-SMI 5" in line, lambda text: {"values": {}})

SMI_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.54.03    Driver Version: 535.54.03    CUDA Version: 12.2     |
|-------------------------------+----------------------+----------------------+
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
+-------------------------------+----------------------+----------------------+
"""


def kinds_of(text: str, kinds: list[Kind]) -> list[str | None]:
    return [s.kind.name if s.kind else None for s in split(text, kinds)]


def test_back_to_back_outputs_without_prompts() -> None:
    text = pasted("openmpi-mpirun-version.txt") + pasted("netns-ip-a.txt") + pasted("env.txt")
    assert kinds_of(text, KINDS) == ["mpi", "ip addr", "env"]


def test_an_unknown_kind_between_two_known_ones_is_its_own_segment() -> None:
    text = (
        "$ ip a\n"
        + pasted("netns-ip-a.txt")
        + "$ nvidia-smi\n"
        + SMI_TABLE
        + "$ mpirun --version\n"
        + pasted("openmpi-mpirun-version.txt")
    )
    segments = split(text, KINDS)
    assert [s.kind.name if s.kind else None for s in segments] == ["ip addr", None, "mpi"]
    assert segments[1].command == "nvidia-smi" and "Tesla V100" in segments[1].text
    assert "Tesla" not in segments[0].text and "Tesla" not in segments[2].text
    # With the NVIDIA kind registered, the same paste splits into three known outputs.
    assert kinds_of(text, [*KINDS, SMI]) == ["ip addr", "smi-banner", "mpi"]


def test_an_unknown_output_without_a_prompt_does_not_swallow_the_next_one() -> None:
    text = SMI_TABLE + pasted("netns-ip-a.txt")
    assert kinds_of(text, KINDS) == [None, "ip addr"]
    assert kinds_of(text, [*KINDS, SMI]) == ["smi-banner", "ip addr"]


def test_prompts_of_many_shells() -> None:
    for prompt in ("$ ", "root@gpu-01:~# ", "[me@node3 ~]$ ", "(venv) me@h:/data$ ", "> $ "):
        segments = split(f"{prompt}ompi_info\n" + pasted("ompi_info.txt"), KINDS)
        assert [(s.kind.name if s.kind else None, s.command) for s in segments] == [
            ("mpi", "ompi_info")
        ], prompt


def test_comments_and_blank_lines_make_no_segments() -> None:
    text = "# on node gpu1:\n\n\n" + pasted("openmpi-mpirun-version.txt") + "\n\n"
    assert kinds_of(text, KINDS) == ["mpi"]
