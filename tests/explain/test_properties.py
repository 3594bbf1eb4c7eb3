"""No input crashes explain: arbitrary bytes, and arbitrary mixes of real message fragments."""

from __future__ import annotations

import io
import time
import tracemalloc
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from doctor.core.logline import Origin, strip_prefixes
from doctor.explain.engine import Scanner, context, findings
from doctor.explain.source import MAX_LINE, iter_blocks
from doctor.facts.nccl.log import MAX_PROCESSES, NcclLog
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
    for block in iter_blocks(io.BytesIO(data)):
        line_no += scanner.feed_block(block, "input", line_no)
    return scanner


def check(data: bytes) -> None:
    scanner = scan_bytes(data)
    found = findings(scanner.result)
    assert len(found) == len(scanner.result.ordered())  # a fallback's hits only alone
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
        log.feed("NCCL INFO Bootstrap: Using eth0:198.18.0.1<0>", Origin("h", pid))
    assert len(log.processes) == MAX_PROCESSES and log.processes_dropped == 50


# Whole lines of every fixture that alone produce a finding, with the code they produce: the
# property tests below mix, prefix and cut them.
def _alone(line: bytes) -> str | None:
    found = findings(scan_bytes(line + b"\n").result)
    return found[0].code if len(found) == 1 else None


FAILURE_LINES = sorted(
    {
        (line, code)
        for path in LOGS.glob("*/*.log")
        for line in body(path).split(b"\n")
        if line.strip() and (code := _alone(line)) is not None
    }
)
ALL_LINES = sorted({line for path in LOGS.glob("*/*.log") for line in body(path).split(b"\n")})
# Prefixes that launchers and loggers put before a line (peeled by strip_prefixes).
LAUNCHER_PREFIXES = [
    b"",
    b"[rank3]:",
    b"[default1]:",
    b"[1,3]<stderr>:",
    b"12: ",
    b"2024-11-20T10:25:02.104211Z ",
    b"[2024-11-20 10:25:02,104] ",
    b"Nov 22 04:08:11 gpu-node-07 python3[4242]: ",
]


def test_every_new_signature_has_failure_lines() -> None:
    codes = {code for _, code in FAILURE_LINES}
    families = ("cuda.", "gpu.xid", "torch.dataloader.", "torch.shm.", "torch.elastic.", "host.")
    for family in families:
        assert any(c.startswith(family) for c in codes), family


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(FAILURE_LINES),
    st.sampled_from(LAUNCHER_PREFIXES),
    st.sampled_from([b"", b"\r", b"  ", b"\t", b" \r"]),
)
def test_a_failure_line_keeps_its_code_under_prefixes_and_line_endings(
    case: tuple[bytes, str], prefix: bytes, ending: bytes
) -> None:
    line, code = case
    # A launcher's label before a line that carries another rank's label is two writers' lines
    # spliced (doctor/core/logline.py): nothing of it is read, by design.
    outer = strip_prefixes((prefix + b"x").decode())[1].rank
    inner = strip_prefixes(line.decode("utf-8", "replace"))[1].rank
    assume(outer is None or inner is None or outer == inner)
    found = findings(scan_bytes(prefix + line + ending + b"\n").result)
    assert [f.code for f in found] == [code]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(ALL_LINES),
            st.sampled_from(LAUNCHER_PREFIXES),
            st.integers(min_value=0, max_value=400),  # where a line is cut (a truncated paste)
            st.binary(max_size=6),
        ).map(lambda t: t[1] + t[0][: t[2]] + t[3]),
        max_size=60,
    ).map(lambda lines: b"\r\n".join(lines))
)
def test_arbitrary_mixes_of_whole_lines_cut_and_prefixed(data: bytes) -> None:
    check(data)


class _Endless(io.RawIOBase):
    """``size`` bytes of one line (a keyword over and over, no newline), then a failure line."""

    def __init__(self, size: int, tail: bytes) -> None:
        self.left, self.tail = size, tail
        self.piece = b"CUDA error: out of memory NVRM: Xid " * (1 << 15)  # ~1.2 MB

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.piece[: min(len(buffer), self.left)] if self.left else self.tail
        if not self.left:
            self.tail = b""
        self.left -= min(self.left, len(data))
        buffer[: len(data)] = data
        return len(data)


def test_a_gigabyte_line_is_read_in_bounded_memory() -> None:
    """One line of 1 GiB (keywords throughout), then a failure: memory stays flat, the line
    counts once and the failure after it is found."""
    tail = b"\nssh: connect to host node2 port 22: Connection refused\n"
    stream = io.BufferedReader(_Endless(1 << 30, tail), 1 << 20)
    tracemalloc.start()
    try:
        scanner = Scanner()
        line_no = 1
        for block in iter_blocks(stream):
            line_no += scanner.feed_block(block, "endless", line_no)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scanner.result.lines == 2
    assert [f.code for f in findings(scanner.result)] == ["cuda.oom", "ssh.connect_failed"]
    assert peak < 16 << 20, peak  # a few blocks of 1 MiB, whatever the line's length
