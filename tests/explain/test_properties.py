"""No input crashes explain: arbitrary bytes, and arbitrary mixes of real message fragments."""

from __future__ import annotations

import io
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.explain.engine import Scanner, context, findings
from doctor.explain.nccl_log import MAX_PROCESSES, NcclLog
from doctor.explain.source import MAX_LINE, iter_chunks
from doctor.render.explain import explain_json
from tests.explain.fixtures import LOGS, body
from tests.properties.counting import counted

# Pieces of real and format lines, so generated input reaches the regexes, not just the filter.
FRAGMENTS = sorted(
    {
        piece
        for path in LOGS.glob("*/*.log")
        for line in body(path).split(b"\n")[:40]
        for piece in line.split(b" ")
        if piece
    }
)


def scan_bytes(data: bytes) -> Scanner:
    scanner = Scanner()
    line_no = 1
    for batch in iter_chunks(io.BytesIO(data)):
        scanner.feed_lines(batch, "input", line_no)
        line_no += len(batch)
    return scanner


def check(data: bytes) -> None:
    scanner = scan_bytes(data)
    found = findings(scanner.result)
    assert len(found) == len(scanner.result.hits)
    doc = explain_json(scanner.result)
    assert doc["context"]["lines"] == scanner.result.lines == context(scanner.result)["lines"]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=4096))
@counted("explain (NCCL logs)")
def test_arbitrary_bytes(data: bytes) -> None:
    check(data)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=8)), max_size=25).map(
            b" ".join
        ),
        max_size=30,
    ).map(b"\n".join)
)
@counted("explain (NCCL logs)")
def test_mixed_real_fragments(data: bytes) -> None:
    check(data)


def test_hostile_lines_stay_fast() -> None:
    """A maximal line repeating a signature's keyword must not make its regex backtrack for long."""
    scanner = Scanner()
    start = time.process_time()
    for sig in scanner.signatures:
        for kw in sig.keywords:
            line = ("NCCL WARN " + (kw + " x ") * MAX_LINE)[:MAX_LINE].encode()
            scanner.feed_lines([line] * 3, "hostile", 1)
    assert time.process_time() - start < 10


def test_many_fake_processes_are_bounded() -> None:
    log = NcclLog()
    for pid in range(MAX_PROCESSES + 50):
        log.feed("NCCL INFO Bootstrap: Using eth0:198.18.0.1<0>", "h", pid)
    assert len(log.processes) == MAX_PROCESSES and log.processes_dropped == 50
