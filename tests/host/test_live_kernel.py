"""The kernel log checks on this machine's own kernel log: lines written to /dev/kmsg are in it,
as a driver's would be, and stay until the machine reboots. So each run judges only its own
window (tests/conftest.py kernel_log_window: since the test began), and every line written here
names itself a test's ("doctor-test") for whoever reads the log later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.kernel.log import parse_kernel
from tests.conftest import run_probe

# One report of each kind, as its driver prints it (tests/fixtures/host/written-dmesg-faults.txt
# names the sources), at the level the kernel gives it.
PLANTED = (
    "<3>nvidia-nvswitch7: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 44 LTSSM Fault Up "
    "(doctor-test)",
    "<0>watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [doctor-test:4242]",
    "<3>INFO: task doctor-test:4243 blocked for more than 122 seconds.",
    "<3>Out of memory: Killed process 4244 (doctor-test) total-vm:1000kB, anon-rss:100kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:10kB oom_score_adj:0",
    "<3>mlx5_core 0000:5c:00.0: poll_health:852:(pid 0): device's health compromised - reached "
    "miss count (doctor-test)",
    "<4>mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 42): Detected insufficient power on the "
    "PCIe slot (27W). (doctor-test)",
    "<0>mce: [Hardware Error]: CPU 0: Machine Check Exception: 5 Bank 4: b200000000070f0f",
    "<4>EDAC MC0: 1 UE memory read error on DIMM_A1 (doctor-test)",
    "<3>pcieport 0000:00:03.1: AER: PCIe Bus Error: severity=Uncorrectable (Fatal), "
    "type=Transaction Layer, (Receiver ID) (doctor-test)",
    "<5>nfs: server doctor-test-nfs not responding, still trying",
)
EXPECTED = {
    "gpu.sxid.fatal",
    "kernel.soft_lockup",
    "kernel.hung_task",
    "kernel.oom_kill",
    "kernel.nic.fatal",
    "kernel.nic.power",
    "kernel.mce.fatal",
    "kernel.memory.ue",
    "kernel.aer.fatal",
    "kernel.nfs.not_responding",
}
SELECT = ["--select", "kernel", "--select", "gpu.sxid"]


def plant(lines: tuple[str, ...]) -> None:
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    try:
        for line in lines:
            os.write(fd, line.encode() + b"\n")  # one write, one record
    finally:
        os.close(fd)


def preflight(*args: str) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "doctor",
            "preflight",
            "--local",
            "--no-allreduce",
            *SELECT,
            "-f",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    report: dict = json.loads(proc.stdout)
    return report


# The kernel stamps a record with its own clock (local_clock), which may stand a few milliseconds
# off the CLOCK_MONOTONIC a window is mapped onto: lines are written well inside their window.
CLOCK_SLACK = 0.5  # seconds


def test_lines_in_the_kernel_log_are_found_within_the_window_only() -> None:
    time.sleep(CLOCK_SLACK)  # the window began with the test (kernel_log_window)
    plant(PLANTED)
    report = preflight()
    found = {f["code"] for f in report["findings"]}
    assert found >= EXPECTED
    soft = next(f for f in report["findings"] if f["code"] == "kernel.soft_lockup")
    assert "CPU#1" in soft["summary"] and "doctor-test:4242" in soft["evidence"][0]
    assert soft["evidence"][-1].startswith("kernel log: /dev/kmsg, since ")
    # A window that starts after the lines sees none of them: every check judged and passed.
    time.sleep(CLOCK_SLACK)
    later = preflight("--since", f"@{time.time():.6f}")
    assert later["findings"] == []
    statuses = {o["check"]: o["status"] for o in later["outcomes"]}
    assert statuses["kernel.lockup"] == statuses["kernel.oom"] == "pass"


def test_where_the_log_is_restricted_it_is_read_from_the_journal_or_said_unreadable() -> None:
    # As an unprivileged user: kernel.dmesg_restrict=1 (this machine's) hides /dev/kmsg, and no
    # journal is kept here; where the sysctl is 0 the user reads it as root would.
    restricted = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1"
    raw = run_probe(prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    facts = parse_kernel(Capture(raw))
    if not restricted:
        assert not isinstance(facts, Missing)
        return
    if isinstance(facts, Missing):
        assert facts.kind == "unreadable"
        assert "kernel.dmesg_restrict=1" in facts.reason and "journalctl" in facts.reason
    else:  # a journal this user may read (the systemd-journal or adm group)
        assert facts.source == "journalctl -k"
