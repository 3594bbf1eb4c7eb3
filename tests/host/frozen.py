"""A real host with real trouble, in a private mount namespace: a FUSE mount whose server never
answers (every access to it waits in the kernel, killably: a hung NFS server's shape), a full
tmpfs, and a process stuck in D state on the frozen mount. Run as a script under `unshare
--mount --propagation private` (tests/host/test_live_host.py): the mounts exist only for this
process and its children and vanish with them; the frozen connection is aborted (the stuck
process freed) when the script closes /dev/fuse, even when the doctor under test fails.

    python3 tests/host/frozen.py WORKDIR -- DOCTOR ARGS...

prints one JSON line: the doctor's exit code and stdout, how long it took, what the victim's
state was while the doctor ran, and the processes left on the frozen mount afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MS_NOSUID, MS_NODEV = 2, 4


def mount(source: str, target: Path, fstype: str, data: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.mount(
        source.encode(), str(target).encode(), fstype.encode(), MS_NOSUID | MS_NODEV, data.encode()
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rfind(")") + 2]


def main() -> int:
    work = Path(sys.argv[1])
    doctor = sys.argv[sys.argv.index("--") + 1 :]
    frozen, full = work / "frozen", work / "full"
    frozen.mkdir(parents=True, exist_ok=True)
    full.mkdir(exist_ok=True)
    mount("tmpfs", full, "tmpfs", "size=1m")
    with open(full / "filler", "wb") as handle, contextlib.suppress(OSError):
        handle.write(b"\0" * (2 << 20))  # more than fits: the tmpfs is left full
    fuse = os.open("/dev/fuse", os.O_RDWR)
    try:
        # Never read: the kernel's INIT waits unanswered, and every request behind it with it.
        mount(
            "doctortest",
            frozen,
            "fuse.doctortest",
            f"fd={fuse},rootmode=40000,user_id=0,group_id=0",
        )
        victim = subprocess.Popen([sys.executable, "-c", f"import os; os.stat({str(frozen)!r})"])
        deadline = time.monotonic() + 5
        while state(victim.pid) != "D" and time.monotonic() < deadline:
            time.sleep(0.05)
        before = state(victim.pid)
        started = time.monotonic()
        proc = subprocess.run(doctor, capture_output=True, text=True, timeout=120, check=False)
        seconds = time.monotonic() - started
        during = state(victim.pid)
        # What the doctor left on the frozen mount, while it is still frozen (the victim is ours).
        left = [
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit()
            and int(p) not in (victim.pid, os.getpid())
            and str(frozen) in _cmdline(int(p))
        ]
    finally:
        os.close(fuse)  # aborts the connection: every waiter gets ENOTCONN and goes on
    victim.wait(timeout=10)
    print(
        json.dumps(
            {
                "rc": proc.returncode,
                "stdout": proc.stdout,
                "stderr": proc.stderr[-2000:],
                "seconds": seconds,
                "victim": victim.pid,
                "victim_before": before,
                "victim_during": during,
                "left": left,
            }
        )
    )
    return 0


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
