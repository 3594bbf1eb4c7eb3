"""Every file the doctor reads, on a node or from a user, is bounded before it is allocated, and a
device, FIFO or socket named as a file is refused with one line, never read forever.

The reproductions: a 9-byte Flight Recorder dump whose LONG_BINPUT names memo index 50,000,000
took 800 MB; /tmp/nccl_trace_rank_N linked to /dev/zero crashed the stacks agent with a
MemoryError; `doctor explain /dev/zero` ran until killed; `doctor explain EMPTY_FOLDER` without a
tty read stdin and exited 0.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from doctor.core.files import NotRegular, read_bounded
from doctor.facts.hang.flight_dump import read_dump
from doctor.stages import stacks_agent

DOCTOR = [sys.executable, "-m", "doctor"]


def _doctor(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DOCTOR, *args], input=stdin.decode(), capture_output=True, text=True, timeout=60
    )


def _peak_mib(code: str) -> int:
    """The peak memory of a fresh interpreter running ``code``."""
    probe = f"{code}\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) >> 10


@pytest.mark.parametrize("index", [50_000_000, 0xFFFFFFFF])
def test_a_memo_index_past_what_was_stored_is_refused(index: int) -> None:
    dump = b"\x80\x02N" + b"r" + struct.pack("<I", index) + b"."
    assert len(dump) == 9
    with pytest.raises(ValueError, match=f"memo index {index} past the 0 stored"):
        read_dump(dump)
    baseline = _peak_mib("import doctor.facts.hang.flight_dump")
    code = "from doctor.facts.hang.flight_dump import read_dump\ntry:\n"
    code += f"    read_dump({dump!r})\nexcept ValueError:\n    pass"
    assert _peak_mib(code) - baseline < 16  # was 776 MB for index 50,000,000


def test_real_dumps_read_as_before() -> None:
    """A pickle as pickle writes it (memo indexes in order, shared values fetched back)."""
    shared = {"frames": [{"name": "allreduce", "line": 3}]}
    doc = {"version": "2.7", "entries": [shared, shared], "pg_status": {"0": {"last": 2}}}
    for protocol in (2, 4, 5):
        got = read_dump(pickle.dumps(doc, protocol=protocol))
        assert got["entries_total"] == 2 and got["pg_status"] == {"0": {"last": 2}}


@given(st.binary(max_size=64))
def test_any_small_dump_is_read_or_refused_in_bounds(data: bytes) -> None:
    started = time.monotonic()
    with contextlib.suppress(ValueError):
        read_dump(b"\x80\x04" + data)
    assert time.monotonic() - started < 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 4 << 20  # KiB: 4 GiB


def test_the_stacks_agent_refuses_a_planted_dump(tmp_path: Path) -> None:
    """torch's default dump path is in /tmp, where any user can plant a link or a FIFO."""
    link = tmp_path / "nccl_trace_rank_0"
    link.symlink_to("/dev/zero")
    fifo = tmp_path / "nccl_trace_rank_1"
    os.mkfifo(fifo)
    real = tmp_path / "nccl_trace_rank_2"
    real.write_bytes(pickle.dumps({"entries": [], "pg_status": {}}))
    me = os.getpid()
    for planted in (link, fifo):
        info = {"pid": me}
        stacks_agent.finish(info, (str(planted), None, False))
        assert "unreadable dump" in info["fr"]["error"]
    info = {"pid": me}
    stacks_agent.finish(info, (str(real), None, False))
    assert info["fr"]["entries_total"] == 0
    os.chown(real, 65534, 65534)  # another user's file where this rank's dump should be
    stacks_agent.finish(info, (str(real), None, False))
    assert "owned by uid 65534" in info["fr"]["error"]


def test_the_stacks_agents_own_reads_are_bounded() -> None:
    assert stacks_agent.read("/dev/zero") is None
    assert stacks_agent.read("/proc/self/cmdline", binary=True)
    assert stacks_agent.read("/proc/self/status", limit=10) is None


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "socket"])
def test_a_device_fifo_or_socket_is_refused_in_one_line(target: str, tmp_path: Path) -> None:
    path = tmp_path / target
    if target == "fifo":
        os.mkfifo(path)
    elif target == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    else:
        path = Path(target)
    with pytest.raises(NotRegular):
        read_bounded(path, 1 << 20)
    for argv in (
        ["explain", str(path)],
        ["analyze", str(path)],
        ["topo", "--input", str(path)],
        ["preflight", "--hostfile", str(path)],
        ["--config", str(path), "checks", "list"],
    ):
        proc = _doctor(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "not a regular file" in proc.stderr


def test_a_folder_of_logs_skips_what_is_no_file(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_text("NCCL WARN Bootstrap : no socket interface found\n")
    (tmp_path / "rank1.log").symlink_to("/dev/zero")
    proc = _doctor("explain", "--format", "json", str(tmp_path))
    assert proc.returncode == 0
    assert f"{tmp_path / 'rank1.log'}: a device, FIFO, socket or broken link, not read" in (
        proc.stderr
    )
    assert '"nccl.iface.none_found"' in proc.stdout


def test_an_empty_or_unreadable_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _doctor(
        "explain", str(empty), stdin=b"NCCL WARN Bootstrap : no socket interface found\n"
    )
    assert proc.returncode == 2 and f"{empty}: no files in it" in proc.stderr
    assert proc.stdout == ""  # stdin was not read instead
