"""A log scanned in parts (as on several CPUs) says exactly what one pass over it says."""

from __future__ import annotations

import multiprocessing
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.explain.engine import Explanation, Scanner
from doctor.explain.parallel import part_bounds, scan_range
from doctor.explain.scan import explain
from doctor.render.explain import explain_json
from tests.explain.fixtures import LOGS, body

# Every log fixture, real captures and format-built ones, one after another: many sources,
# ranks, stamps and NCCL processes in one file.
CORPUS = b"\n".join(body(p) for p in sorted(LOGS.glob("*/*.log"))) + b"\n"
ONE_PASS = 1 << 40  # a parallel_from no test file reaches


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parallel") / "job.log"
    path.write_bytes(CORPUS)
    return path


def said(result: Explanation) -> dict[str, Any]:
    """The JSON document, less the time it was made, and less the hang's evidence and the
    launchers' reports: read after the scan, from the file itself, the same however the scan
    was cut (the corpus's watchdog lines from many jobs do make one)."""
    doc = explain_json(replace(result, hang=None, hang_sources=[], exits=[]))
    del doc["created"]
    return doc


def in_parts(path: Path, line_cuts: list[int]) -> Explanation:
    """Scan ``path`` cut before each of these (0-based) lines, merging the parts in order."""
    starts = [0]
    for index in sorted(set(line_cuts)):
        at = len(b"".join(line + b"\n" for line in CORPUS.split(b"\n")[:index]))
        if 0 < at < len(CORPUS):
            starts.append(at)
    scanner = Scanner()
    scanner.result.sources.append(str(path))
    for start, end in zip(starts, [*starts[1:], len(CORPUS)], strict=True):
        scanner.absorb(scan_range(str(path), start, end), scanner.result.lines)
    return scanner.result


def test_the_corpus_exercises_the_merge(log: Path) -> None:
    whole = explain([str(log)], parallel_from=ONE_PASS)
    assert len(whole.hits) >= 20 and whole.nccl.processes and len(whole.ranks) > 2
    assert any(h.origin.time is not None for h in whole.hits.values())


@pytest.mark.parametrize("cuts", [[1], [200], [1, 2, 3], [100, 400, 700, 1000]])
def test_parts_merge_to_the_one_pass_result(log: Path, cuts: list[int]) -> None:
    assert said(in_parts(log, cuts)) == said(explain([str(log)], parallel_from=ONE_PASS))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cuts=st.lists(st.integers(0, CORPUS.count(b"\n")), max_size=5))
def test_any_cut_merges_to_the_one_pass_result(log: Path, cuts: list[int]) -> None:
    assert said(in_parts(log, cuts)) == said(explain([str(log)], parallel_from=ONE_PASS))


def test_the_process_pool_gives_the_one_pass_result_and_leaves_no_process(log: Path) -> None:
    # parallel_from=2: parts of one byte at least, so one per CPU (two in CI), in real children.
    pooled = explain([str(log)], parallel_from=2)
    assert said(pooled) == said(explain([str(log)], parallel_from=ONE_PASS))
    assert multiprocessing.active_children() == []


def test_part_bounds_start_at_lines_and_cover_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"a" * 10 + b"\n" + b"b" * 10 + b"\n" + b"c" * 3)
    assert part_bounds(str(path), 25, 2) == [(0, 22), (22, 25)]  # byte 12 is in line 2
    assert part_bounds(str(path), 25, 8) == [(0, 11), (11, 22), (22, 25)]
    path.write_bytes(b"x" * 100)  # one line: one part, whatever was asked
    assert part_bounds(str(path), 100, 4) == [(0, 100)]


def test_cutting_a_gigabyte_line_holds_no_more_than_a_chunk(tmp_path: Path) -> None:
    """Part bounds are found by reading to the next newline, not by holding the line."""
    path = tmp_path / "one-line.log"
    with path.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte of NULs without a newline
        handle.seek(1 << 30)
        handle.write(b"\nssh: connect to host node2 port 22: Connection refused\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        bounds = part_bounds(str(path), size, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert bounds == [(0, (1 << 30) + 1), ((1 << 30) + 1, size)]
    assert peak < 4 << 20, peak
