"""Words one of which a hung job's evidence always holds: every keyword of the hang readers
(watchdog.py, pasted.py, verdicts.py) contains one (tests/explain/hang/test_written.py keeps it
so), and Flight Recorder's dumps start as pickles or JSON do. scan.py looks for them in C before
it imports the readers, which cost a short log's explanation more than its reading."""

from __future__ import annotations

SIGNS = (
    b"Thread ", b"thread ", b"Process ", b"most recent call", b'"frames"', b"PID",
    b"Core file information", b"compiled with CUDA", b"managed by process", b"Missing",
    b"operation counts", b'"nccl_version"', b"collective", b"has errors", b"at entry",
    b"FR dumps", b"remainder of ranks", b"Stalled", b"missing ranks", b"ready ranks", b"Work",
    b"watchdog", b"Received ", b"heartbeat", b"Heartbeat", b"timed out", b"Timed out",
    b"taking the entire process down", b"aborted", b"Terminating the process after",
    b"is disabled, but would have", b"monitoredBarrier", b"Monitored Barrier",
    b"errors for group", b"async exception", b"error detected", b"Timeout at",
    b"dump signal", b"best knowledge",
)  # fmt: skip
DUMP_STARTS = (b"\x80", b"{")  # a pickle's protocol byte, a JSON document


def shows_hang(data: bytes) -> bool:
    return data.startswith(DUMP_STARTS) or any(sign in data for sign in SIGNS)
