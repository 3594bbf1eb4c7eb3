"""hang/watchdog.py reads every version's watchdog wording, whatever wraps it and whatever lies
between: the fixtures under tests/fixtures/logs/hang/watchdog/ were written from PyTorch's source
(each one's first line says which version), those under gloo/ captured here by
tests/explain/hang/capture_gloo.py."""

from __future__ import annotations

import random
import re
import time
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.logline import splice_at, strip_prefixes
from doctor.explain.hang.watchdog import KEYWORDS, WatchdogLine, read_watchdog
from doctor.explain.hang.watchdog_wordings import WORDINGS
from tests.properties.counting import counted

HANG = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "hang"
FIXTURES = sorted([*HANG.glob("watchdog/*.log"), *HANG.glob("gloo/*.log")])


def lines_of(path: Path) -> list[str]:
    """The fixture's lines without its header (which cites the sources)."""
    return path.read_text().splitlines()[1:]


def read(line: str) -> WatchdogLine | None:
    return read_watchdog(*strip_prefixes(line))


def describe(said: WatchdogLine) -> str:
    """The kind, then every field the line gave."""
    parts = [said.kind]
    for f in fields(said):
        value = getattr(said, f.name)
        if f.name != "kind" and value not in (None, ()):
            shown = ",".join(map(str, value)) if isinstance(value, tuple) else value
            parts.append(f"{f.name}={shown}")
    return " ".join(parts)


# Per fixture: each line read (numbered in the file, its header line 1) as describe() shows it.
EXPECTED = {
    "watchdog/v1.8-srun.log": [
        "4 timeout rank=0 op=BROADCAST timeout_ms=1800000 ran_ms=1800446",
        "5 timeout rank=1 op=BROADCAST timeout_ms=1800000 ran_ms=1800512",
        "6 timeout rank=3 op=RECV timeout_ms=1800000 ran_ms=1800390",
        "7 abort rank=0",
        "9 timeout rank=1 op=BROADCAST timeout_ms=1800000 ran_ms=1800512",
        "11 failure rank=2",
        "12 abort rank=3",
        "13 failure rank=2",
    ],
    "watchdog/v1.11-desync-torchrun.log": [
        "3 timeout rank=0 seq=8421 op=ALLREDUCE timeout_ms=1800000 ran_ms=1800183",
        "4 desync rank=0 seq=8421 op=ALLREDUCE",
        "6 desync rank=0 seq=8421 completed=8420 peers=2",
        "12 timeout rank=1 seq=8421 op=ALLREDUCE timeout_ms=1800000 ran_ms=1800201",
        "13 desync rank=1 seq=8421 op=ALLREDUCE",
        "15 desync rank=1 seq=8421 completed=8420 peers=2",
        "16 timeout rank=3 seq=8421 op=ALLREDUCE timeout_ms=1800000 ran_ms=1800240",
        "17 abort rank=0",
        "21 abort rank=1 seq=8421 op=ALLREDUCE timeout_ms=1800000 ran_ms=1800201",
    ],
    "watchdog/desync-report.log": [
        "3 desync rank=0 seq=121 op=ALLGATHER",
        "5 desync seq=120 peers=3,6",
        "6 desync seq=121 completed=120 peers=5",
    ],
    "watchdog/gloo-monitored-barrier.log": [
        "2 barrier rank=0 timeout_ms=30000",
        "4 barrier rank=0 timeout_ms=30000",
    ],
    "watchdog/v2.0-mpirun.log": [
        "3 timeout rank=2 seq=1204 op=_ALLGATHER_BASE numel_in=4194304 numel_out=16777216"
        " timeout_ms=600000 ran_ms=600321",
        "4 timeout rank=0 seq=1204 op=_ALLGATHER_BASE numel_in=4194304 numel_out=16777216"
        " timeout_ms=600000 ran_ms=600337",
        "5 timeout rank=3 seq=1204 op=_ALLGATHER_BASE numel_in=4194304 numel_out=16777216"
        " timeout_ms=600000 ran_ms=600352",
        "6 abort rank=2",
        "7 abort rank=2",
        "9 timeout rank=2 seq=1204 op=_ALLGATHER_BASE numel_in=4194304 numel_out=16777216"
        " timeout_ms=600000 ran_ms=600321",
    ],
    "watchdog/blocking-wait.log": [
        "5 timeout rank=1 op=ALLREDUCE timeout_ms=60000 ran_ms=60012",
        "6 timeout rank=1 seq=77 op=ALLREDUCE timeout_ms=60000 ran_ms=60009",
        "7 timeout rank=1 seq=77 op=ALLREDUCE numel_in=4096 numel_out=4096 timeout_ms=60000",
        "8 timeout rank=1 seq=77 op=ALLREDUCE numel_in=4096 numel_out=4096 timeout_ms=60000",
    ],
    "watchdog/v2.2-dev-monitor.log": [
        "2 timeout rank=0 seq=512 op=ALLREDUCE numel_in=1048576 numel_out=1048576"
        " timeout_ms=600000 ran_ms=600107",
        "3 abort rank=0",
        "4 abort rank=0",
        "5 abort rank=0 seq=512 op=ALLREDUCE numel_in=1048576 numel_out=1048576"
        " timeout_ms=600000 ran_ms=600107",
        "6 heartbeat rank=1",
        "7 heartbeat rank=1",
        "8 heartbeat rank=1",
    ],
    "watchdog/v2.2-pg.log": [
        "2 timeout rank=2 seq=3301 op=REDUCE_SCATTER numel_in=33554432 numel_out=8388608"
        " timeout_ms=600000 ran_ms=600044",
        "4 desync rank=2 seq=3301 op=REDUCE_SCATTER",
        "5 desync peers=1",
        "6 abort rank=2",
        "7 abort rank=2",
        "8 dump rank=0 group=0",
        "9 dump rank=1 group=0",
        "10 heartbeat rank=3 group=0",
        "11 dump rank=0 group=0",
        "12 heartbeat rank=3 group=0 timeout_ms=600000",
    ],
    "watchdog/v2.3-dump.log": [
        "2 timeout rank=1 seq=6463 op=ALLREDUCE numel_in=1 numel_out=1 timeout_ms=1800000"
        " ran_ms=1800017",
        "3 failure rank=1 group=0 seq=6463 enqueued=6463 completed=6462",
        "4 timeout_at rank=1 group=0 seq=6463 enqueued=6463 completed=6462",
        "5 abort rank=1",
        "6 abort rank=1",
        "7 dump rank=1 group=0 enqueued=6463 completed=6462",
        "8 dump rank=0 group=0 enqueued=6463 completed=6462 peers=1",
        "9 dump rank=2 group=0 enqueued=6463 completed=6462 peers=1",
        "10 dump rank=3 group=0 enqueued=6462 completed=6462 peers=1",
        "12 dump rank=0 group=0 peers=1",
        "13 dump rank=1 group=0",
        "15 heartbeat rank=3 group=0",
    ],
    "watchdog/v2.4-subgroups-kubectl.log": [
        "2 timeout rank=1 seq=90211 op=ALLGATHER numel_in=2097152 numel_out=8388608"
        " timeout_ms=600000 ran_ms=600083",
        "3 failure rank=1 group=3 group_name=TP seq=90211 enqueued=90212 completed=90210",
        "4 timeout_at rank=1 group=3 group_name=TP seq=90211 enqueued=90212 completed=90210",
        "5 abort rank=1",
        "6 abort rank=1",
        "7 dump rank=0 group=0 group_name=default_pg enqueued=1802 completed=1802",
        "8 dump rank=6 group=0 group_name=default_pg",
        "9 status rank=2 group=3 group_name=TP enqueued=90210 completed=90210",
        "11 failure rank=2 seq=90211 op=ALLGATHER numel_in=2097152 numel_out=8388608"
        " timeout_ms=600000",
        "15 abort rank=6",
        "16 heartbeat rank=6 group=0 group_name=default_pg timeout_ms=480000",
    ],
    "watchdog/v2.5-guid-ray.log": [
        "2 timeout rank=3 seq=31 op=ALLREDUCE numel_in=117440512 numel_out=117440512"
        " timeout_ms=600000 ran_ms=600031 pid=270291",
        "3 failure rank=3 group=3 seq=31 enqueued=31 completed=30 pid=270291",
        "4 timeout_at rank=3 group=3 seq=31 enqueued=31 completed=30 pid=270291",
        "5 dump rank=0 group=0 group_name=default_pg enqueued=17 completed=17 pid=270288 peers=3",
        "6 dump rank=3 group=0 group_name=default_pg enqueued=17 completed=17 pid=270291",
        "8 failure rank=1 group=3 seq=31 enqueued=31 completed=30 pid=270289",
        "9 timeout_at rank=1 group=3 seq=31 enqueued=31 completed=30 pid=270289",
        "10 status rank=2 group=3 enqueued=30 completed=30 pid=270290",
        "11 abort rank=3 group=0 group_name=default_pg pid=270291",
        "12 abort rank=3 group=3 seq=31 op=ALLREDUCE numel_in=117440512 numel_out=117440512"
        " timeout_ms=600000 ran_ms=600031 pid=270291",
    ],
    "watchdog/v2.6-today-journald.log": [
        "2 timeout rank=0 seq=12 op=ALLREDUCE numel_in=262144 numel_out=262144 timeout_ms=600000"
        " ran_ms=600093 pid=5120 host=gpu-c01",
        "3 failure rank=0 group=0 group_name=default_pg seq=12 enqueued=15 completed=11 pid=5120"
        " host=gpu-c01",
        "6 failure rank=3 group=0 group_name=default_pg pid=6230 host=gpu-c02 peers=0",
        "7 failure rank=3 group=0 group_name=default_pg seq=12 enqueued=12 completed=11 pid=6230"
        " host=gpu-c02",
        "8 dump rank=2 group=0 group_name=default_pg pid=6229 host=gpu-c02",
        "9 dump rank=2 group=0 group_name=default_pg enqueued=11 completed=11 pid=6229"
        " host=gpu-c02 peers=0",
        "10 failure rank=1 group=0 group_name=default_pg seq=12 enqueued=14 completed=11 pid=5121"
        " host=gpu-c01",
        "11 abort rank=0 pid=5120 host=gpu-c01",
        "12 abort rank=0 pid=5120 host=gpu-c01",
        "13 abort rank=0 group=0 group_name=default_pg seq=12 op=ALLREDUCE numel_in=262144"
        " numel_out=262144 timeout_ms=600000 ran_ms=600093 pid=5120 host=gpu-c01",
        "16 heartbeat rank=2 group=0 group_name=default_pg timeout_ms=480000 pid=6229 host=gpu-c02",
        "17 abort rank=2 group=0 group_name=default_pg pid=6229 host=gpu-c02",
    ],
    # Only the first writer's part of a spliced line, nothing the splice cut short, no host.
    "watchdog/spliced.log": [
        "2 failure rank=3 group=0 group_name=default_pg seq=1402 enqueued=1402",
        "4 timeout rank=3 seq=1402",
        "6 timeout_at rank=4 group=0 group_name=default_pg seq=1402 enqueued=1402",
        "8 timeout_at rank=1 group=0 group_name=default_pg seq=1402 enqueued=1402",
        "10 failure rank=0 group=0 group_name=default_pg seq=1402 enqueued=1402 completed=1401",
    ],
    # Gloo gives the rank only in torchrun's label, the timeout, and no op or work: its
    # monitoredBarrier (and TORCH_DISTRIBUTED_DEBUG=DETAIL's, before each collective) names the
    # ranks that did not arrive; DETAIL's fingerprints give each rank's op and sequence number.
    "gloo/allreduce-late-rank.log": ["12 io_timeout rank=0 timeout_ms=5000"],
    "gloo/broadcast-late-rank.log": ["12 io_timeout rank=0 timeout_ms=5000"],
    "gloo/allreduce-late-rank-detail.log": [
        "4 barrier rank=0 timeout_ms=5000 peers=1",
        "5 barrier rank=0 timeout_ms=5000 peers=1",
        "15 barrier rank=0 timeout_ms=5000 peers=1",
    ],
    "gloo/monitored-barrier-late-rank.log": [
        "4 barrier rank=0 timeout_ms=5000 peers=1",
        "11 barrier rank=0 timeout_ms=5000 peers=1",
        "13 io_timeout rank=0 timeout_ms=5000",
    ],
    "gloo/monitored-barrier-late-root.log": [
        "4 barrier rank=1 peers=0",
        "11 barrier rank=1 peers=0",
        "13 io_timeout rank=1 timeout_ms=5000",
    ],
    "gloo/monitored-barrier-wait-all.log": [
        "5 barrier rank=0 timeout_ms=5000 peers=1",
        "6 barrier rank=0 timeout_ms=5000 peers=2",
        "7 barrier rank=0 timeout_ms=5000 peers=1,2",
        "14 barrier rank=0 timeout_ms=5000 peers=1,2",
    ],
    "gloo/peer-exits-detail.log": ["13 barrier rank=0 seq=1 op=ALLREDUCE"],
    "gloo/mismatch-detail.log": [
        "14 mismatch rank=0 seq=1 op=ALLREDUCE peers=1",
        "25 mismatch rank=1 seq=1 op=BROADCAST peers=0",
    ],
}


def read_fixture(path: Path) -> list[str]:
    return [
        f"{n} {describe(said)}"
        for n, line in enumerate(lines_of(path), 2)
        if (said := read(line)) is not None
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_reads_as_expected(name: str) -> None:
    assert read_fixture(HANG / name) == EXPECTED[name]


def test_every_fixture_is_expected() -> None:
    assert sorted(str(p.relative_to(HANG)) for p in FIXTURES) == sorted(EXPECTED)


WATCHDOG_LINES = [line for path in FIXTURES for line in lines_of(path) if read(line) is not None]
FOREIGN_LINES = [line for path in FIXTURES for line in lines_of(path) if read(line) is None]


def test_every_wording_is_in_a_fixture() -> None:
    """Each version's wording has a line in the fixtures (so the expectations above cover it)."""
    texts = [strip_prefixes(line)[0] for line in WATCHDOG_LINES]
    for kind, keyword, phrase, _ in WORDINGS:
        found = [m.group() for text in texts if (m := re.search(phrase, text)) is not None]
        assert found, (kind, phrase)
        assert all(keyword in text for text in found), (kind, keyword)


def test_a_line_read_holds_a_keyword() -> None:
    """KEYWORDS is the callers' test before reading: a line without one is never read."""
    assert all(any(k in line for k in KEYWORDS) for line in WATCHDOG_LINES)
    for line in WATCHDOG_LINES:
        for k in KEYWORDS:
            line = line.replace(k, k[:-1])  # every keyword broken
        assert read(line) is None


# What a job's output holds between the watchdog's lines, beside the fixtures' own.
OTHER_OUTPUT = [
    "Epoch 3:  41%|████      | 412/1000 [03:12<04:34,  2.14it/s, loss=2.41]",
    "gpu-a01:5120:5188 [0] NCCL INFO comm 0x55d1c2 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init"
    " COMPLETE",
    "[rank0]:[W1127 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] Warning:"
    " TORCH_NCCL_AVOID_RECORD_STREAMS is the default now",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    '  File "/workspace/train.py", line 88, in <module>',
    "print('Watchdog', 'timeout', 'rank', 3)",
    "[Rank 3] loss=0.51 (this line only looks like the watchdog's)",
]
FOREIGN = st.one_of(
    st.sampled_from(FOREIGN_LINES + OTHER_OUTPUT),
    st.text(max_size=300).filter(lambda t: not any(k in t for k in KEYWORDS)),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(WATCHDOG_LINES), min_size=1, max_size=8),
    st.lists(FOREIGN, max_size=20),
    st.randoms(use_true_random=False),
)
@counted("hang watchdog (foreign lines between)")
def test_foreign_lines_between_change_nothing_read(
    watchdog: list[str], foreign: list[str], rnd: random.Random
) -> None:
    mixed = list(watchdog)
    for line in foreign:
        mixed.insert(rnd.randint(0, len(mixed)), line)
    alone = [describe(s) for line in watchdog if (s := read(line)) is not None]
    together = [describe(s) for line in mixed if (s := read(line)) is not None]
    assert together == alone


# Lines a second writer's prefix starts: what splices into another line.
SPLICERS = [line for line in WATCHDOG_LINES + FOREIGN_LINES if splice_at(line) == 0]


WHOLE_LINES = [line for line in WATCHDOG_LINES if splice_at(strip_prefixes(line)[0]) < 0]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(WHOLE_LINES), st.sampled_from(SPLICERS), st.data())
@counted("hang watchdog (spliced lines)")
def test_a_spliced_line_gives_only_what_its_first_writer_said(
    first: str, second: str, data: st.DataObject
) -> None:
    """A line cut anywhere in its message and another writer's line put there reads as a part
    of the first line (or not at all): nothing from the second, nothing cut short, no host."""
    message, _ = strip_prefixes(first)
    wrapping = len(first) - len(message)
    cut = data.draw(st.integers(wrapping + 1, len(first)))
    said, whole = read(first[:cut] + second), read(first)
    assert whole is not None
    if said is None:
        return
    assert said.kind == whole.kind and said.host is None and said.pid is None
    for f in fields(said):
        value = getattr(said, f.name)
        if f.name not in ("host", "pid") and value not in (None, ()):
            assert value == getattr(whole, f.name), f.name


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000), st.sampled_from(KEYWORDS))
@counted("hang watchdog (garbage)")
def test_garbage_never_raises(text: str, keyword: str) -> None:
    for line in (text, keyword + text, text + keyword, f"[Rank 3] {keyword}{text}"):
        said = read(line)
        assert said is None or said.kind in {kind for kind, _, _, _ in WORDINGS}


def test_an_endless_line_reads_in_bounded_time() -> None:
    """A pasted blob's 64 KiB line of half-phrases is read in well under a second."""
    blob = "[Rank 3] Work WorkNCCL(SeqNum=1, Collective WorkNCCL(" * 1200
    started = time.perf_counter()
    assert read(blob) is None
    assert time.perf_counter() - started < 0.5
