"""docs/reliability.md is generated from a real run of the matrix and the properties: its rows
cover exactly the scenarios the matrix defines, every parser the properties count, and no
committed figure breaks a promise."""

from __future__ import annotations

import re

from bench.load_bench import verdict_table
from tests.faults.document import DOC, MATRIX_HEADER
from tests.faults.results import REPO
from tests.faults.scenarios import CASES

# Every parser a property test counts (its counted decorator), wherever the test lives.
PROPERTY_PARSERS = {
    name
    for path in (REPO / "tests").rglob("test_*.py")
    for name in re.findall(r'@counted\("([^"]+)"\)', path.read_text())
}


def table(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_rows_are_exactly_the_matrix() -> None:
    rows = table(DOC.read_text(), MATRIX_HEADER)
    got = sorted((r[0], r[1]) for r in rows)
    assert got == sorted((s.name, cmd) for s, cmd in CASES)


def test_no_committed_figure_breaks_a_promise() -> None:
    for scenario, command, _exit, deadline, taken, reported, blamed, left, whole in table(
        DOC.read_text(), MATRIX_HEADER
    ):
        where = f"{scenario} / {command}"
        assert float(taken) <= float(deadline.split()[0]), where
        got, of = reported.split("/")
        assert got == of or scenario.startswith(("ctrl-c", "output")), where
        assert blamed == "0" and left == "0", where
        assert whole.startswith("yes"), where


def test_every_parser_has_its_count() -> None:
    rows = table(DOC.read_text(), "| parser | properties | generated inputs tried |")
    counts = {r[0].strip("`"): int(r[2]) for r in rows}
    assert set(counts) == PROPERTY_PARSERS
    assert all(n >= 100 for n in counts.values()), counts


def test_every_load_row_kept_its_verdict() -> None:
    rows = table(DOC.read_text(), verdict_table({"results": []})[0])
    # The verdict held in every run; the time is reported (it is the machine's load too).
    assert rows and all(r[-2] == "yes" for r in rows), rows
