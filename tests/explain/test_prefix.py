"""Launcher and logger prefixes peel off; who said it and when stay."""

from __future__ import annotations

import datetime as dt

import pytest

from doctor.explain.prefix import strip_prefixes

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
            None,
        ),
        (
            "[W1122 04:12:06.615173547 socket.cpp:207] [c10d] The hostname",
            "[c10d] The hostname",
            None,
            None,
            None,
            None,
        ),
        ("2026-11-22T04:07:59Z 3: hello", "hello", None, None, 3, T),
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
