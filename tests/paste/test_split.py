"""The splitter: several outputs in one paste, prompts, and outputs no kind knows."""

from __future__ import annotations

from doctor.paste import KINDS
from doctor.paste.kind import Kind
from doctor.paste.split import split
from tests.paste.pastekit import pasted

# Output no kind knows (`lscpu`, captured), and a stand-in kind that would know it, as another
# module's kinds (the NVIDIA ones) join the registry.
LSCPU = pasted("lscpu.txt")
LSCPU_KIND = Kind("lscpu", lambda line: line.startswith("Architecture:"), lambda _: {"values": {}})


def kinds_of(text: str, kinds: list[Kind]) -> list[str | None]:
    return [s.kind.name if s.kind else None for s in split(text, kinds)]


def test_back_to_back_outputs_without_prompts() -> None:
    text = pasted("openmpi-mpirun-version.txt") + pasted("netns-ip-a.txt") + pasted("env.txt")
    assert kinds_of(text, KINDS) == ["mpi", "ip addr", "env"]


def test_an_unknown_kind_between_two_known_ones_is_its_own_segment() -> None:
    text = (
        "$ ip a\n"
        + pasted("netns-ip-a.txt")
        + "$ lscpu\n"
        + LSCPU
        + "$ mpirun --version\n"
        + pasted("openmpi-mpirun-version.txt")
    )
    segments = split(text, KINDS)
    assert [s.kind.name if s.kind else None for s in segments] == ["ip addr", None, "mpi"]
    assert segments[1].command == "lscpu" and "Byte Order" in segments[1].text
    assert "Byte Order" not in segments[0].text + segments[2].text
    # With a kind that knows it registered, the same paste splits into three known outputs.
    assert kinds_of(text, [*KINDS, LSCPU_KIND]) == ["ip addr", "lscpu", "mpi"]


def test_an_unknown_output_without_a_prompt_does_not_swallow_the_next_one() -> None:
    text = LSCPU + pasted("netns-ip-a.txt")
    assert kinds_of(text, KINDS) == [None, "ip addr"]
    assert kinds_of(text, [*KINDS, LSCPU_KIND]) == ["lscpu", "ip addr"]


def test_a_table_top_border_joins_the_output_below_it() -> None:
    table = "+------+\n| Filesystem 1 |\n+------+\n"
    banner = Kind("banner", lambda line: "| Filesystem" in line, lambda text: {"values": {}})
    [segment] = split(table, [*KINDS, banner])
    assert segment.kind is banner and segment.first_line == 1


def test_prompts_of_many_shells() -> None:
    for prompt in ("$ ", "root@gpu-01:~# ", "[me@node3 ~]$ ", "(venv) me@h:/data$ ", "> $ "):
        segments = split(f"{prompt}ompi_info\n" + pasted("ompi_info.txt"), KINDS)
        assert [(s.kind.name if s.kind else None, s.command) for s in segments] == [
            ("mpi", "ompi_info")
        ], prompt


def test_comments_and_blank_lines_make_no_segments() -> None:
    text = "# on node gpu1:\n\n\n" + pasted("openmpi-mpirun-version.txt") + "\n\n"
    assert kinds_of(text, KINDS) == ["mpi"]


def test_other_package_listings_are_not_ompi_info() -> None:
    assert kinds_of("Package: cuda-toolkit-12-4\nVersion: 12.4.1-1\n", KINDS) == [None]


def test_a_markdown_quoted_paste() -> None:
    quoted = "".join(
        f"> {line}" for line in ("$ mpirun --version\n", *pasted("env.txt").splitlines(True))
    )
    segments = split(quoted + ">\n> " + pasted("netns-ip-a.txt").replace("\n", "\n> "), KINDS)
    assert [s.kind.name if s.kind else None for s in segments] == ["env", "ip addr"]
    assert segments[1].lines[0].startswith("1: lo:")


def test_python_prompts() -> None:
    text = ">>> from mpi4py import MPI\n>>> MPI.Get_library_version()\n" + pasted(
        "openmpi-library-version.txt"
    )
    [segment] = split(text, KINDS)
    assert segment.command == "MPI.Get_library_version()" and segment.kind is not None
