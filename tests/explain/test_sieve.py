"""The sieve (doctor/explain/sieve.py) and the mapped read (mapped.py) change how fast a log is
read, never what it says: the same findings, counts, line numbers and NCCL facts as reading every
line of it in Python, whatever repeats, and however the file is read."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.explain import engine, parallel, sieve
from doctor.explain import mapped as mapped_module
from doctor.explain import scan as scan_module
from doctor.explain.engine import Explanation, Scanner
from doctor.explain.mapped import WINDOW, Mapped, scan_mapped
from doctor.explain.scan import explain
from doctor.explain.stored import anchors
from doctor.render.explain import explain_json
from tests.explain.anchors import SIMD_LIMIT, Candidates, choose, corpus, keywords
from tests.explain.fixtures import LOGS, body

CORPUS = [line for p in sorted(LOGS.glob("*/*.log")) for line in body(p).split(b"\n") if line]


def said(result: Explanation) -> dict[str, Any]:
    """The report, less when it was made and the file names it read (first_seen, evidence), and
    less the hang's evidence and the launchers' reports, read after the scan from the file
    itself (however it was read)."""
    doc = explain_json(replace(result, hang=None, hang_sources=[], exits=[]))
    del doc["created"]
    sources = doc["context"].pop("sources")
    text = json.dumps(doc)
    for source in sources:
        text = text.replace(json.dumps(source)[1:-1] + ":", "log:")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def every_line_read(data: bytes) -> Explanation:
    """The scan with nothing remembered, line by line: every line holding an anchor is read in
    Python, in order (no block is read a distinct line at a time)."""
    scanner = Scanner()
    scanner._seen.lines = _Forgetful()
    density, engine.REPEATED_DENSITY = engine.REPEATED_DENSITY, 0
    try:
        scanner.feed_block(data, "log", 1)
    finally:
        engine.REPEATED_DENSITY = density
    return scanner.result


class _Forgetful(dict):  # type: ignore[type-arg]
    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def sieved(data: bytes) -> Explanation:
    scanner = Scanner()
    scanner.feed_block(data, "log", 1)
    return scanner.result


def test_the_stored_anchors_are_the_chosen_ones_and_few_enough() -> None:
    words = keywords()
    assert sorted(anchors()) == sorted(choose(words)), "run: python -m tests.explain.anchors"
    assert len(anchors()) <= SIMD_LIMIT
    assert all(any(a in w for a in anchors()) for w in words)


def test_the_stored_order_makes_few_search_candidates() -> None:
    # Not the exact order (a new log fixture changes what the search finds), but one that keeps
    # Teddy's candidates low: the order they are chosen in makes over three times as many.
    candidates = Candidates(corpus())
    assert candidates(list(anchors())) * 2 < candidates(choose(keywords()))


def test_a_keyword_no_stored_anchor_covers_is_its_own() -> None:
    found = sieve.Sieve([b"CCL INFO", b"brand new keyword"], [b"CCL "])
    assert found.anchors == (b"CCL ", b"brand new keyword")


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(CORPUS), st.integers(1, 4)), min_size=1, max_size=80).map(
        lambda picks: b"\n".join(line for line, n in picks for _ in range(n)) + b"\n"
    )
)
def test_lines_read_before_count_as_if_read_again(data: bytes) -> None:
    """Repeated fixture lines (failures, NCCL version lines, Ray's repeated ones): skipping a
    line read before changes no count, no line number and no fact."""
    assert said(sieved(data)) == said(every_line_read(data))


# Lines written here in the shapes of the corpus's own (an NCCL WARN behind a bracketed stamp, a
# CUDA error with none): what a stamp does to the lines after it.
WARN_T1 = b"[2026-11-20 10:15:02] gpu-a:41200:41380 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"  # noqa: E501
WARN_T2 = b"[2025-03-11 14:02:07] gpu-a:41200:41380 [0] misc/socket.cc:612 NCCL WARN socketConnectCheck: connect to 172.17.0.1<43117> returned Connection refused"  # noqa: E501
UNSTAMPED = b"RuntimeError: CUDA error: peer access is not supported between these two devices"
CORPUS_NCCL_VERSION = b"vm:722:722 [0] NCCL INFO NCCL version 2.28.9+cuda13.0"


def test_a_stamped_line_read_again_sets_the_time_again() -> None:
    """A line read before is not read again, but its stamp still times the unstamped line after
    it: here the CUDA error follows the first stamp (2026) again, not the second (2025)."""
    data = b"\n".join([WARN_T1, WARN_T2, WARN_T1, UNSTAMPED]) + b"\n"
    assert said(sieved(data)) == said(every_line_read(data))
    codes = [f["code"] for f in said(sieved(data))["findings"]]
    assert codes.index("cuda.peer_access") > codes.index("nccl.ib.memlock")


def test_what_the_log_shows_first_is_kept_however_its_lines_repeat() -> None:
    """The library (and the driver, HIP, ROCm, path, benchmark) is what the log shows first: a
    repeat skipped as read before cannot change it (hypothesis drew an RCCL banner, NCCL version
    lines, then the RCCL banner again: read again, the last line had made it RCCL)."""
    rccl, nccl = b"RCCL version : 2.20.5-HEAD:f1d1a53", CORPUS_NCCL_VERSION
    data = b"\n".join([rccl] + [nccl] * 6 + [rccl]) + b"\n"
    assert said(sieved(data)) == said(every_line_read(data))
    assert sieved(data).nccl.library == "RCCL"


def test_a_block_read_a_distinct_line_at_a_time_keeps_the_order_of_stamps() -> None:
    """The same where lines repeat enough to be read a distinct line at a time: the places of a
    stamped line are taken in order, not at its first one."""
    data = (b"\n".join([WARN_T1] * 20 + [WARN_T2] * 20 + [WARN_T1] * 20 + [UNSTAMPED]) + b"\n") * 2
    assert said(sieved(data)) == said(every_line_read(data))


def test_a_block_of_lines_all_read_before_leaves_the_time_of_its_last_stamp() -> None:
    """Where every line of a repeating block was read before, none is read again, and the time
    after the block is that of its last stamped line (neither its first one nor the one seen
    first last), which the unstamped line of the next block takes."""
    t3 = WARN_T1.replace(b"2026-11-20", b"2024-01-05")
    blocks = [[WARN_T1, WARN_T2, t3] * 10, [WARN_T1] * 5 + [WARN_T2] * 20 + [t3] * 20 + [WARN_T2]]
    blocks.append([UNSTAMPED])
    scanner, line_no = Scanner(), 1
    for lines in blocks:
        line_no += scanner.feed_block(b"\n".join(lines) + b"\n", "log", line_no)
    data = b"".join(b"\n".join(lines) + b"\n" for lines in blocks)
    every = every_line_read(data)
    assert said(scanner.result) == said(every)
    when = scanner.result.hits["cuda.peer_access"].origin.time
    assert when == every.hits["cuda.peer_access"].origin.time
    assert when == scanner.result.hits["nccl.socket.connect_failed"].origin.time  # WARN_T2's


def test_a_new_line_in_a_repeating_window_after_windows_of_nothing_new_has_its_number(
    tmp_path: Path,
) -> None:
    """Windows with no line not read before count no lines; a later window whose lines mostly
    repeat and that holds a new one still numbers it from the file's start."""
    info = (
        b"gpu1:4100:4100 [0] NCCL INFO Channel 00 : 0[3d000] -> 1[3e000] via P2P/direct pointer\n"
    )
    plain = b"epoch 1 step 5 loss 0.1234 lr 3e-4 grad_norm 0.5, an ordinary training line\n"
    new = b"ssh: connect to host n2 port 22: Connection refused\n"
    data = b"RuntimeError: CUDA error: out of memory\n" + plain * (2 * WINDOW // len(plain))
    data += info * (WINDOW // len(info) // 2) + new + info * 1000
    path = tmp_path / "job.log"
    path.write_bytes(data)
    found = said(explain([str(path)]))
    assert found == said(every_line_read(data))
    line = data[: data.index(new)].count(b"\n") + 1
    assert f"log:{line}" in [f["data"]["first_seen"] for f in found["findings"]]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from(CORPUS), min_size=1, max_size=6, unique=True).flatmap(
        lambda pool: st.lists(st.sampled_from(pool), min_size=8, max_size=300)
    ),
    st.integers(1, 4),
)
def test_a_few_lines_repeated_in_any_order_and_in_blocks_read_as_every_line(
    lines: list[bytes], parts: int
) -> None:
    """A few lines, over and over in any order (what makes a block be read a distinct line at a
    time), fed whole and in blocks as windows are: the same as reading every line in order."""
    data = b"\n".join(lines) + b"\n"
    expected = said(every_line_read(data))
    assert said(sieved(data)) == expected
    scanner, line_no, step = Scanner(), 1, max(6, len(lines) // parts)  # 6: a cut first line
    for at in range(0, len(lines), step):
        line_no += scanner.feed_block(b"\n".join(lines[at : at + step]) + b"\n", "log", line_no)
    assert said(scanner.result) == expected


def test_the_corpus_many_times_over_reads_as_every_line_read() -> None:
    data = (b"\n".join(CORPUS) + b"\n") * 5
    assert said(sieved(data)) == said(every_line_read(data))


def test_a_file_through_mmap_stdin_gzip_and_parts_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (b"\n".join(CORPUS) + b"\n") * 3 + b"the last line has no newline"
    monkeypatch.setattr(mapped_module, "WINDOW", 1 << 14)  # many windows: a head, then the rest
    parts = []
    scan_file = parallel.scan_file
    monkeypatch.setattr(
        parallel, "scan_file", lambda *a, **k: parts.append(k) or scan_file(*a, **k)
    )
    plain, packed = tmp_path / "job.log", tmp_path / "job.log.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    mapped = said(explain([str(plain)]))
    assert mapped == said(explain([str(packed)]))
    assert mapped == said(every_line_read(data))
    # Its head read here, the rest in parts on every CPU (as when the head shows it is worth it).
    assert mapped == said(explain([str(plain)], parallel_from=len(data) // 3, worth=0.0))
    assert parts and parts[0]["start"] > 0 and parts[0]["lines_before"] > 0
    assert mapped["context"]["lines"] == data.count(b"\n") + 1


def test_processes_worth_it_only_by_the_whole_head_are_still_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's first quarter starts them early where it shows them LIKELY to pay; where only
    the whole head shows them worth it, they are started then."""
    data = (b"\n".join(CORPUS) + b"\n") * 3
    monkeypatch.setattr(mapped_module, "WINDOW", 1 << 14)
    monkeypatch.setattr(scan_module, "LIKELY", float("inf"))  # never early
    started = []
    start_children = parallel.start_children
    monkeypatch.setattr(
        parallel, "start_children", lambda n: started.append(n) or start_children(n)
    )
    plain = tmp_path / "job.log"
    plain.write_bytes(data)
    pooled = said(explain([str(plain)], parallel_from=len(data) // 3, worth=0.0))
    assert started and pooled == said(every_line_read(data))


def test_without_wc_the_lines_are_counted_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "job.log"
    path.write_bytes(b"\n".join(CORPUS) + b"\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no wc on it
    assert explain([str(path)]).lines == len(CORPUS)


class _Broken(sieve.Sieve):
    def find(self, block: bytes | memoryview) -> sieve.Matches:
        if b"boom" in block:
            raise RuntimeError("search failed")
        return super().find(block)


def test_a_search_that_fails_is_raised_in_the_reader_and_stops_every_thread() -> None:
    blocks = [b"ok\n", b"boom\n", b"ok\n", b"ok\n"]
    before = sys.getswitchinterval()
    ahead = sieve.Ahead(blocks, _Broken((), anchors()), 2)
    assert sys.getswitchinterval() == min(before, sieve.SWITCH)
    with pytest.raises(RuntimeError, match="search failed"):
        list(ahead)
    assert not [t for t in threading.enumerate() if t.name == "sieve"]
    assert sys.getswitchinterval() == before


def test_beside_busy_programs_every_cpu_searches() -> None:
    """Where more tasks are ready to run than there are CPUs, the sieve takes a search thread per
    CPU (its share of a busy machine); only with a CPU to spare does the reader keep one."""
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        time.sleep(0.2)  # both started and running
        assert sieve.searchers() == sieve.cpus()
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert 1 <= sieve.searchers() <= sieve.cpus()


def test_a_read_stopped_early_leaves_no_thread_and_no_wc(tmp_path: Path) -> None:
    """The reader stops after the first window (an error, or enough read): the searches under
    way end, none starts, wc is killed and reaped, and the switch interval is what it was."""
    path = tmp_path / "job.log"
    path.write_bytes((b"\n".join(CORPUS) + b"\n") * (3 * WINDOW // len(b"\n".join(CORPUS)) + 1))
    before = sys.getswitchinterval()
    scanner = Scanner()
    with path.open("rb") as handle:
        mapped = Mapped(str(path), handle.fileno(), scanner.sieve)
        assert mapped.counter is not None
        wc = mapped.counter.pid
        assert wc is not None
        mapped.scan(scanner, until=1)
        assert not mapped.done
        mapped.close()
    assert not [t for t in threading.enumerate() if t.name == "sieve"]
    with pytest.raises(ChildProcessError):
        os.waitpid(wc, os.WNOHANG)  # reaped already: no zombie, no process
    assert sys.getswitchinterval() == before


def test_a_line_longer_than_a_window_is_read_from_its_start(tmp_path: Path) -> None:
    """A window cuts a line with no newline in it; its head is read, what lies past MAX_LINE of
    it is not (as for a stream), and the lines after it keep their numbers."""
    head = b"ssh: connect to host n2 port 22: Connection refused "
    long = head + b"x" * (WINDOW + 100) + b" NVRM: Xid (PCI:0000:3b:00): 79, pid=1"
    data = b"start\n" + long + b"\nrank 0: CUDA error: out of memory\n"
    path = tmp_path / "long.log"
    path.write_bytes(data)
    result = explain([str(path)])
    assert {h.signature.code: h.line_no for h in result.hits.values()} == {
        "ssh.connect_failed": 2,
        "cuda.oom": 3,
    }
    assert result.lines == 3
    scanner = Scanner()
    with path.open("rb") as handle:
        part = Mapped(str(path), handle.fileno(), scanner.sieve, len(b"start\n"))
        assert scan_mapped(scanner, part) == 2


def test_the_quick_command_line_prints_what_the_full_one_does(tmp_path: Path) -> None:
    """`doctor explain -f json FILE` skips the command-line library; with a config file in the
    folder (which may change its defaults) it goes through it. Both print the same report."""
    log = LOGS / "format" / "nccl-peer-closed.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def report(folder: Path) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-m", "doctor", "explain", "-f", "json", str(log)],
            cwd=folder, env=env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        doc = json.loads(out.stdout)
        del doc["created"]
        return doc

    full = tmp_path / "configured"
    full.mkdir()
    (full / "doctor.toml").write_text("[explain]\n")
    assert report(tmp_path) == report(full)
    assert engine.Scanner is Scanner
