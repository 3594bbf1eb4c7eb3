"""The host checks on this machine, against the real thing: a mount whose server never answers,
a full filesystem, a process stuck in D state, swap that is on. Each lives only as long as its
test (a private mount namespace, a swap file turned off after)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from doctor.core.model import Missing
from doctor.facts.host.host import HostFacts
from tests import factkit as fk
from tests.conftest import run_probe

REPO = Path(__file__).resolve().parent.parent.parent
FROZEN = Path(__file__).parent / "frozen.py"
DEADLINE = 20.0  # the probe's


def doctor(*args: str) -> list[str]:
    return [sys.executable, "-m", "doctor", *args]


def in_private_mounts(work: Path, *argv: str) -> dict[str, Any]:
    """Run the scenario of tests/host/frozen.py: the doctor beside a frozen FUSE mount, a full
    tmpfs and a process stuck on the frozen mount, all in a mount namespace of their own."""
    proc = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            str(FROZEN),
            str(work),
            "--",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_a_hung_mount_a_full_filesystem_and_a_stuck_process(tmp_path: Path) -> None:
    # A shorter deadline for paths, from doctor.toml as a user would set it.
    (tmp_path / "doctor.toml").write_text("[thresholds.host]\npath_timeout_s = 1.5\n")
    frozen, full = tmp_path / "frozen", tmp_path / "full"
    argv = ["preflight", "--local", "--no-allreduce", "--select", "host", "-f", "json"]
    result = in_private_mounts(
        tmp_path, *doctor(*argv, "--mount", str(frozen), "--path", str(full))
    )
    assert result["victim_before"] == result["victim_during"] == "D"
    report = json.loads(result["stdout"])
    by_code = {f["code"]: f for f in report["findings"]}
    assert {"host.mount.hung", "host.disk.full", "host.dstate"} <= set(by_code)
    hung = by_code["host.mount.hung"]
    assert (
        hung["summary"]
        == f"{frozen} did not answer in 1.5 s: fuse.doctortest from doctortest hangs"
    )
    assert any(
        e.startswith("host.path_timeout_s = 1.5 s (absolute; ") and e.endswith("doctor.toml)")
        for e in hung["evidence"]
    )
    assert by_code["host.disk.full"]["summary"].startswith(f"{full} has 0.0% free")
    assert f"python3[{result['victim']}]" in by_code["host.dstate"]["summary"]
    assert result["rc"] == 1  # a fail finding
    # The doctor answered well inside its deadline and left nothing waiting on the mount.
    assert result["seconds"] < DEADLINE
    assert result["left"] == []


def test_swap_that_is_on_is_seen(tmp_path: Path) -> None:
    area = tmp_path / "swap"
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={area}", "bs=1M", "count=16"], check=True, capture_output=True
    )
    area.chmod(0o600)
    subprocess.run(["mkswap", str(area)], check=True, capture_output=True)
    subprocess.run(["swapon", str(area)], check=True, capture_output=True)
    try:
        facts = fk.real("", "vm", run_probe())
    finally:
        subprocess.run(["swapoff", str(area)], check=True, capture_output=True)
    host = facts.host
    assert isinstance(host, HostFacts)
    assert not isinstance(host.swaps, Missing)
    assert [s.name for s in host.swaps if s.name == str(area)] == [str(area)]
    assert not isinstance(host.memory, Missing)
    assert host.memory.swap_total >= (16 << 20) - 4096  # the swap header's page
