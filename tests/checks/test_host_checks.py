"""The host and kernel-log checks on pasted outputs: what a healthy node's say (nothing), what a
full disk, a hot sensor, a drained node, a faulty kernel log and a node that strays say."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import run_cli

from doctor.core.capture import Capture
from doctor.core.errors import UsageError
from doctor.core.model import Finding, Severity, Status
from doctor.facts.host.host import HostFacts
from doctor.facts.host.memory import Memory
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from doctor.judge.thresholds import set_overrides, threshold
from doctor.paste.reader import document
from tests import factkit as fk

FIXTURES = Path(__file__).parent.parent / "fixtures" / "host"
GIB = 1 << 30
HEALTHY = (
    "captured-dmesg.txt",
    "captured-df-h.txt",
    "captured-df-i.txt",
    "captured-free.txt",
    "captured-proc-swaps.txt",
    "captured-findmnt.txt",
    "written-dmesg-healthy-gpu-node.txt",
    "written-sensors.txt",
)


@pytest.fixture(autouse=True)
def shipped_thresholds() -> Iterator[None]:
    set_overrides({}, "")
    yield
    set_overrides({}, "")


def node(name: str, *fixtures: str, extra: str = "") -> NodeFacts:
    paste = "\n".join((FIXTURES / f).read_text() for f in fixtures) + extra
    return parse_node(name, Capture(document(name, paste.encode(), False)))


def findings(*nodes: NodeFacts) -> list[Finding]:
    outcomes = run_checks(load_checks(["host", "kernel"]), fk.cluster(*nodes))
    assert not [o for o in outcomes if o.status is Status.CRASH], outcomes
    return [f for o in outcomes for f in o.findings]


def codes(found: list[Finding], at_least: Severity = Severity.WARN) -> set[str]:
    return {f.code for f in found if f.severity >= at_least}


def test_a_healthy_nodes_outputs_raise_nothing() -> None:
    assert codes(findings(node("gpu1", *HEALTHY))) == set()


def test_full_filesystems_and_inodes() -> None:
    found = findings(node("gpu1", "captured-df-h-full-tmpfs.txt", "captured-df-i-full-tmpfs.txt"))
    full = {(f.code, f.data.get("path")) for f in found}
    assert ("host.disk.full", "/tmp/hc_cap/scratch") in full
    assert ("host.inodes.full", "/tmp/hc_cap/inodes") in full
    assert codes(found) == {"host.disk.full", "host.inodes.full"}
    disk = next(f for f in found if f.code == "host.disk.full")
    assert "host.disk_full_pct = 1 % (absolute)" in disk.evidence
    assert disk.fix is not None and disk.fix.commands[0].startswith("sudo du -xh")


def test_read_only_images_and_the_systems_mounts_are_not_judged() -> None:
    found = findings(node("gpu1", "written-df-wrapped.txt"))
    judged = {(f.code, f.data["path"]) for f in found}
    assert judged == {("host.disk.low", "/"), ("host.disk.full", "/home")}  # not /snap, /run


def test_a_threshold_from_doctor_toml_changes_the_verdict() -> None:
    set_overrides({"host": {"disk_free_pct": 2.0}}, "doctor.toml")
    found = findings(node("gpu1", "written-df-wrapped.txt"))
    assert {f.data["path"] for f in found if f.code.startswith("host.disk")} == {"/home"}
    assert threshold("host.disk_free_pct") == 2.0
    with pytest.raises(UsageError, match=r"unknown threshold 'host\.disk_fre_pct'"):
        set_overrides({"host": {"disk_fre_pct": 2}}, "doctor.toml")
    with pytest.raises(UsageError, match="must be a number"):
        set_overrides({"host.disk_free_pct": "ten"}, "doctor.toml")


def test_hot_sensors() -> None:
    found = findings(node("gpu1", "written-sensors-hot.txt"))
    assert codes(found) == {"host.temperature.critical", "host.temperature.high"}
    critical = next(f for f in found if f.code == "host.temperature.critical")
    assert "Package id 1 101°C" in critical.summary


def test_swap_on_is_said_and_swap_in_use_warns() -> None:
    found = findings(node("gpu1", "captured-free-h-swap-on.txt", "captured-swapon-show-on.txt"))
    assert [(f.code, f.severity) for f in found] == [("host.swap.on", Severity.INFO)]
    facts = node("gpu1", "captured-free.txt")
    host = facts.host
    assert isinstance(host, HostFacts)
    paging = dataclasses.replace(host, memory=Memory(64 * GIB, 40 * GIB, 16 * GIB, 8 * GIB))
    found = findings(dataclasses.replace(facts, host=paging))
    assert codes(found) == {"host.swap.in_use"}
    assert found[0].data == {"swap_used_pct": 12.5, "threshold": "absolute"}


def test_the_faulty_kernel_log() -> None:
    found = findings(node("gpu1", "written-dmesg-faults.txt"))
    assert codes(found) == {
        "gpu.sxid.fatal",
        "gpu.sxid.nonfatal",
        "kernel.soft_lockup",
        "kernel.hard_lockup",
        "kernel.hung_task",
        "kernel.rcu_stall",
        "kernel.oom_kill",
        "kernel.oops",
        "kernel.nic.fatal",
        "kernel.nic.cmd_timeout",
        "kernel.nic.power",
        "kernel.nic.temperature",
        "kernel.mce.fatal",
        "kernel.mce",
        "kernel.cpu_thermal",
        "kernel.memory.ue",
        "kernel.aer.fatal",
        "kernel.nfs.not_responding",
        "kernel.nfs.stale",
    }
    assert codes(found, Severity.INFO) - codes(found) == {"kernel.oom_kill.cgroup"}
    soft = next(f for f in found if f.code == "kernel.soft_lockup")
    assert soft.evidence[-1] == "kernel log: pasted, the pasted lines"
    nfs = next(f for f in found if f.code == "kernel.nfs.not_responding")
    assert nfs.fix is not None and nfs.fix.commands == ("ping -c 3 fs01",)


def test_an_nfs_server_that_came_back_only_warns() -> None:
    log = "[ 1.0] nfs: server fs01 not responding, still trying\n[ 9.0] nfs: server fs01 OK\n"
    found = findings(node("gpu1", "captured-free.txt", extra=log))
    assert codes(found) == {"kernel.nfs.recovered"}


def test_a_hostile_server_name_is_quoted_in_the_fix() -> None:
    log = "[ 1.0] nfs: server $(reboot);x not responding, still trying\n"
    (finding,) = [f for f in findings(node("gpu1", extra=log)) if f.code.startswith("kernel.nfs")]
    assert finding.fix is not None
    assert finding.fix.commands == ("ping -c 3 '$(reboot);x'",)


def test_corrected_errors_warn_only_above_their_threshold() -> None:
    few = "".join(f"[ {i}.0] EDAC MC0: 1 CE memory read error on DIMM_A1\n" for i in range(1, 4))
    assert codes(findings(node("gpu1", extra=few))) == set()
    many = "[ 5.0] EDAC MC0: 150 CE memory read error on DIMM_A1\n"
    (finding,) = [f for f in findings(node("gpu1", extra=many)) if f.code == "kernel.memory.ce"]
    assert finding.data == {"count": 150, "threshold": "absolute"}
    assert "kernel.memory_ce_max = 100 count (absolute)" in finding.evidence


@pytest.mark.parametrize(
    "report",
    [
        "pcieport 0000:80:01.0: AER: Uncorrected (Fatal) error received: 0000:81:00.0",  # < 5.3
        "pcieport 0000:80:01.0: AER: Uncorrected (Fatal) error received: id=8100",  # no device
        "pcieport 0000:80:01.0: AER: Multiple Uncorrected (Fatal) error message received from "
        "0000:81:00.0",  # 6.x
    ],
)
def test_a_ports_report_of_a_fatal_error_stands_alone_and_is_not_counted_twice(
    report: str,
) -> None:
    """drivers/pci/pcie/aer.c: the port reports the error; the device's own lines may not follow
    (gone from the bus). Where they do, the error is one, not two."""
    found = [f for f in findings(node("gpu1", extra=f"[ 9.0] {report}\n")) if "aer" in f.code]
    (alone,) = found
    where = "0000:80:01.0" if "id=" in report else "0000:81:00.0"  # 4.x: the port, no device
    assert (alone.code, alone.summary) == ("kernel.aer.fatal", f"1 fatal PCIe error(s) on {where}")
    if "id=" in report:
        return
    detail = (
        "[ 9.1] nvidia 0000:81:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
        "type=Transaction Layer, (Requester ID)\n"
    )
    both = [
        f for f in findings(node("gpu1", extra=f"[ 9.0] {report}\n{detail}")) if "aer" in f.code
    ]
    assert [(f.code, f.summary) for f in both] == [
        ("kernel.aer.fatal", "1 fatal PCIe error(s) on 0000:81:00.0")
    ]


def test_a_netdev_message_names_its_device_and_an_unnamed_report_shows_no_empty_name() -> None:
    log = (
        "[ 7.0] mlx5_core 0000:0c:00.0 ibp12s0: Detected insufficient power on the PCIe slot "
        "(27W).\n[ 8.0] NFS: stale file handle\n"
    )
    found = {f.code: f for f in findings(node("gpu1", extra=log))}
    assert found["kernel.nic.power"].summary.endswith(": 0000:0c:00.0")
    assert found["kernel.nfs.stale"].evidence[0] == "[8s] NFS: stale file handle"


def _with_memory(name: str, total: int) -> NodeFacts:
    facts = node(name, "captured-free.txt")
    host = facts.host
    assert isinstance(host, HostFacts)
    return dataclasses.replace(
        facts, host=dataclasses.replace(host, memory=Memory(total, total, 0, 0))
    )


def test_a_node_with_a_missing_dimm_stands_out() -> None:
    nodes = [_with_memory(f"gpu{i}", 2048 * GIB) for i in range(1, 4)]
    nodes.append(_with_memory("gpu4", 1920 * GIB))  # one 128 GiB DIMM of 16 gone
    found = [f for f in findings(*nodes) if f.code == "host.memory.drift"]
    assert [f.nodes for f in found] == [("gpu4",)]
    assert found[0].data["threshold"] == "relative"
    same = [_with_memory(f"gpu{i}", 2048 * GIB - i * (64 << 20)) for i in range(1, 5)]
    assert not [f for f in findings(*same) if f.code == "host.memory.drift"]


def test_thresholds_come_from_doctor_toml_through_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    paste = tmp_path / "gpu1.txt"
    paste.write_text((FIXTURES / "written-df-wrapped.txt").read_text())
    argv = ["analyze", str(paste), "--select", "host.disk", "-f", "json"]
    rc, out, _ = run_cli(argv, capsys)
    assert {f["data"]["path"] for f in json.loads(out)["findings"]} == {"/", "/home"}
    (tmp_path / "doctor.toml").write_text("[thresholds.host]\ndisk_free_pct = 2\n")
    rc, out, _ = run_cli(argv, capsys)
    (finding,) = json.loads(out)["findings"]
    assert finding["data"]["path"] == "/home" and rc == 1
    (tmp_path / "doctor.toml").write_text('[thresholds]\n"host.disk_free" = 2\n')
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and "unknown threshold 'host.disk_free'" in err


def _gpu_node(daemons: dict[str, tuple[int, ...]], toolkit: tuple[str, ...]) -> NodeFacts:
    facts = node("gpu1", "captured-free.txt")
    host = facts.host
    assert isinstance(host, HostFacts)
    host = dataclasses.replace(host, daemons=daemons, toolkit=toolkit)
    return dataclasses.replace(facts, host=host, pci=[fk.gpu()])


def test_a_container_runtime_without_the_nvidia_toolkit() -> None:
    none = {"dockerd": (812,), "nvidia-persistenced": (9,)}
    found = findings(_gpu_node(none, ()))
    assert codes(found) == {"host.services.container_toolkit"}
    assert found[0].fix is not None
    assert found[0].fix.commands[-1] == "sudo nvidia-ctk runtime configure --runtime=docker"
    assert codes(findings(_gpu_node(none, ("nvidia-ctk",)))) == set()
    outcomes = run_checks(load_checks(["host"]), fk.cluster(node("cpu1", "captured-free.txt")))
    (services,) = [o for o in outcomes if o.check == "host.services"]
    assert services.status is Status.SKIP and "no NVIDIA GPU" in services.reason
