"""Launcher and logger prefixes peel off; who said it and when stay."""

from __future__ import annotations

import datetime as dt

import pytest

from doctor.core.logline import splice_at, strip_prefixes


def this_year(*parts: int) -> float:
    """glog stamps carry no year: the parser takes the current one."""
    year = dt.datetime.now(dt.timezone.utc).year
    return dt.datetime(year, *parts, tzinfo=dt.timezone.utc).timestamp()


T = dt.datetime(2026, 11, 22, 4, 7, 59, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("line", "text", "host", "pid", "rank", "when"),
    [
        # NCCL 2.32.3 WARN line exactly as the real library printed it here.
        (
            "[2026-11-22 04:07:59] vm:10610:10610 [0] bootstrap.cc:129 (bootstrapNetInit) "
            "NCCL WARN "
            "Bootstrap : no socket interface found",
            "NCCL WARN Bootstrap : no socket interface found",
            "vm",
            10610,
            None,
            T,
        ),
        (
            "vm:2674:2674 [0] NCCL INFO Bootstrap: Using eth0:198.18.5.1<0>",
            "NCCL INFO Bootstrap: Using eth0:198.18.5.1<0>",
            "vm",
            2674,
            None,
            None,
        ),
        # Open MPI --tag-output, then NCCL.
        (
            "[1,3]<stdout>:gpu-b:5120:5120 [0] NCCL INFO Using network Socket",
            "NCCL INFO Using network Socket",
            "gpu-b",
            5120,
            3,
            None,
        ),
        # torchrun --tee, then c10 logging (real torch 2.13 format).
        (
            "[rank0]:[E1122 04:12:24.482596318 ProcessGroupGloo.cpp:67] "
            "Gloo connectFullMesh failed",
            "Gloo connectFullMesh failed",
            None,
            None,
            0,
            this_year(11, 22, 4, 12, 24, 482596),
        ),
        (
            "[W1122 04:12:06.615173547 socket.cpp:207] [c10d] The hostname",
            "[c10d] The hostname",
            None,
            None,
            None,
            this_year(11, 22, 4, 12, 6, 615173),
        ),
        ("2026-11-22T04:07:59Z 3: hello", "hello", None, None, 3, T),
        # srun -l before an indented line (a traceback's frame, torchrun's error entry).
        (
            "1:   rank      : 3 (local_rank: 1)",
            "  rank      : 3 (local_rank: 1)",
            None,
            None,
            1,
            None,
        ),
        (
            "Nov 22 04:07:59 node7 sshd[812]: Connection closed",
            "Connection closed",
            "node7",
            812,
            None,
            None,
        ),
        ("plain text: stays", "plain text: stays", None, None, None, None),
    ],
)
def test_strip(
    line: str, text: str, host: str | None, pid: int | None, rank: int | None, when: float | None
) -> None:
    got, origin = strip_prefixes(line)
    assert got == text
    assert (origin.host, origin.pid, origin.rank, origin.time) == (host, pid, rank, when)


@pytest.mark.parametrize(
    ("stamp", "when"),
    [
        ("2026-11-22T04:07:59+02:00 msg", T - 7200),
        ("2026-11-22 04:07:59,000 msg", T),
        ("2026-02-31T04:07:59Z msg", None),  # not a date: no time, no crash
    ],
)
def test_timestamps(stamp: str, when: float | None) -> None:
    assert strip_prefixes(stamp)[1].time == when


E = 1732248491.5  # 2024-11-22 04:08:11.5 UTC


# Each collector's wrapping, written from its documented format (tests/properties/wrappings.py
# names the sources); what is peeled, and what the wrapping tells.
@pytest.mark.parametrize(
    ("line", "text", "fields"),
    [
        (
            "\x1b[2m\x1b[36m(RayWorkerWrapper pid=5120, ip=10.0.0.7)\x1b[0m "
            "n7:5120:5120 [3] NCCL INFO Using network IB\x1b[32m [repeated 14x across cluster] "
            "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
            "deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/"
            "configure-logging.html#log-deduplication for more options.)\x1b[0m",
            "NCCL INFO Using network IB",
            {"host": "n7", "pid": 5120, "via": "10.0.0.7", "repeat": 14},
        ),
        ("(MyActor pid=480956) loss 0.5", "loss 0.5", {"pid": 480956}),
        ("(raylet, ip=10.0.0.3) [2024-11-22 ...] oom", "[2024-11-22 ...] oom", {"via": "10.0.0.3"}),
        (
            "[pod/train-worker-1/pytorch] train-worker-1:88:88 [0] transport/net_ib.cc:123 "
            "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4321> with error 12",
            "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4321> with error 12",
            {
                "via": "train-worker-1",
                "host": "train-worker-1",
                "pid": 88,
                "src": "transport/net_ib.cc",
            },
        ),
        ("trainer-1  | step 3", "step 3", {"via": "trainer-1"}),
        (
            "2024-11-22T04:08:11+0000 gpu7 python3[812]: hello",
            "hello",
            {"host": "gpu7", "pid": 812, "time": E - 0.5},
        ),
        (
            "1732248491.500000 gpu7 python3[812]: hello",
            "hello",
            {"host": "gpu7", "pid": 812, "time": E},
        ),
        ("Nov 22 04:08:11.123456 gpu7 kernel: NVRM: Xid", "NVRM: Xid", {"host": "gpu7"}),
        ("<14>Nov 22 04:08:11 gpu7 train[9]: x", "x", {"host": "gpu7", "pid": 9}),
        (
            "<14>1 2024-11-22T04:08:11.5Z gpu7 train 9 - - x",
            "x",
            {"host": "gpu7", "pid": 9, "time": E},
        ),
        ("[1732248491.5] x", "x", {"time": E}),
        ("1732248491 samples seen", "1732248491 samples seen", {}),  # a bare number: a message's
        ("\x1b[1;31mCUDA error: out of memory\x1b[0m\r\n", "CUDA error: out of memory", {}),
        ("\ufeff[1,2]<stderr>:x", "x", {"rank": 2}),
    ],
)
def test_collector_wrappings(line: str, text: str, fields: dict[str, object]) -> None:
    got, origin = strip_prefixes(line)
    assert got == text
    want = {"host": None, "pid": None, "rank": None, "time": None, "via": None, "src": None,
            "repeat": 0, "level": None, **fields}  # fmt: skip
    assert origin._asdict() == want


# A second writer's line spliced into this one: peeling stops where it starts, takes nothing of
# it (its host least of all), and splice_at finds it inside a message.
@pytest.mark.parametrize(
    ("line", "text", "host", "rank"),
    [
        # after a logger's header, only NCCL's prefix is the same writer's
        (
            "[rank3]:[E1127 10:02:11.6 ProcessGroupNCCL.cpp:1] [rank5]:node5:12:12 [0] NCCL INFO x",
            "[rank5]:node5:12:12 [0] NCCL INFO x",
            None,
            3,
        ),
        (
            "[rank3]:[E1127 10:02:11.6 ProcessGroupNCCL.cpp:1] node3:12:12 [0] NCCL INFO x",
            "NCCL INFO x",
            "node3",
            3,
        ),
        # the same launcher's label naming another rank
        ("[rank3]:[rank5]:node5:1:1 [0] NCCL INFO x", "[rank5]:node5:1:1 [0] NCCL INFO x", None, 3),
        ("3: 5: node5:12:12 [0] NCCL INFO x", "5: node5:12:12 [0] NCCL INFO x", None, 3),
        # not a splice: the same label twice, torchrun's local rank before torch's global one
        ("[rank3]:[rank3]:node3:12:12 [0] NCCL INFO x", "NCCL INFO x", "node3", 3),
        ("[default1]:[rank5]:[E1127 10:02:11.6 ProcessGroupNCCL.cpp:1] x", "x", None, 1),
        # c10's own logger before torch 2.4 printed no time
        ("[rank2]:[E ProcessGroupNCCL.cpp:542] [Rank 2] Watchdog", "[Rank 2] Watchdog", None, 2),
    ],
)  # fmt: skip
def test_a_spliced_line_peels_only_its_first_writer(
    line: str, text: str, host: str | None, rank: int | None
) -> None:
    got, origin = strip_prefixes(line)
    assert (got, origin.host, origin.rank) == (text, host, rank)


def test_glog_gives_a_thread_not_a_process() -> None:
    """glog's number after the time is the thread's: no pid is taken from it."""
    origin = strip_prefixes("[E1127 10:02:11.606667 140219 ProcessGroupNCCL.cpp:1785] x")[1]
    assert origin.pid is None and origin.time is not None


@pytest.mark.parametrize(
    ("message", "at"),
    [
        ("[Rank 3] Watchdog caught ... OpType=ALLRED[rank5]:[E1127 10:02:11.6 a.cpp:1] x", 42),
        ("last completed work: 14[E1127 10:02:11.606 ProcessGroupNCCL.cpp:1834] x", 23),
        ("ran for 6000[E ProcessGroupNCCL.cpp:1] x", 12),
        ("at work: 31[1,5]<stderr>:x", 11),
        ("done(RayWorkerWrapper pid=9, ip=10.0.0.2) x", 4),
        ("WorkNCCL(SeqNum=12, OpType=ALLREDnode5:1:1 [0] NCCL INFO x", 20),  # the host's start
        ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)", -1),
        ("work 7: [E] done, rank[3]: ok (pid=5)", -1),
    ],
)
def test_splice_at(message: str, at: int) -> None:
    assert splice_at(message) == at
