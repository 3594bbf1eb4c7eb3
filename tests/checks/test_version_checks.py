"""Cross-node drift checks: the minority is named compactly, the baseline wins over the vote."""

from __future__ import annotations

from checks.versions import driver_drift, nccl_drift, nccl_settings_drift, software_drift
from doctor.core.model import Missing, Status
from doctor.facts.nccl.libraries import NcclConf
from doctor.judge.runner import run_checks
from tests import factkit as fk


def findings(check, *nodes, baseline=None):
    (result,) = run_checks([check], fk.cluster(*nodes, baseline=baseline))
    return result.findings


def test_driver_minority_is_named() -> None:
    nodes = [fk.node(f"gpu{i:02d}", driver=fk.driver("570.133.20")) for i in range(1, 5)]
    nodes += [fk.node("gpu05", driver=fk.driver("550.90.07", cuda="12.4"))]
    by_code = {f.code: f for f in findings(driver_drift, *nodes)}
    assert set(by_code) == {"drift.driver", "drift.cuda_driver"}
    driver = by_code["drift.driver"]
    assert driver.nodes == ("gpu05",)
    assert driver.summary == "NVIDIA driver differs on gpu05: 550.90.07 instead of 570.133.20"
    assert "expected 570.133.20 (the majority: gpu[01-04])" in driver.evidence
    assert driver.fix is not None and "570.133.20" in driver.fix.text


def test_nodes_without_a_driver_are_left_out() -> None:
    nodes = [fk.node("a", driver=fk.driver()), fk.node("b", driver=Missing("no GPU", "absent"))]
    assert findings(driver_drift, *nodes) == ()


def test_baseline_overrides_the_majority() -> None:
    old = [fk.node(f"n{i}", driver=fk.driver("550.90.07")) for i in range(3)]
    new = fk.node("n3", driver=fk.driver("570.133.20"))
    base = fk.node("golden", driver=fk.driver("570.133.20"))
    drift = [
        f for f in findings(driver_drift, *old, new, baseline=base) if f.code == "drift.driver"
    ]
    (finding,) = drift
    assert finding.nodes == ("n0", "n1", "n2")
    assert "the baseline" in finding.evidence[1]


def test_torch_nccl_drift_fails_and_pins_the_majority() -> None:
    a = fk.node("n1", nccl=fk.nccl(fk.lib(version="2.27.7")))
    b = fk.node("n2", nccl=fk.nccl(fk.lib(version="2.27.7")))
    c = fk.node("n3", nccl=fk.nccl(fk.lib(version="2.21.5")))
    by_code = {f.code: f for f in findings(nccl_drift, a, b, c)}
    assert set(by_code) == {"drift.nccl", "drift.nccl_torch"}
    torch = by_code["drift.nccl_torch"]
    assert torch.nodes == ("n3",) and int(torch.severity) == 30
    assert torch.fix is not None and "pip install nvidia-nccl-cu12==2.27.7" in torch.fix.commands


def test_every_nccl_set_and_plugins() -> None:
    one = fk.nccl(fk.lib(), plugins=("/usr/lib/libnccl-net.so",))
    two = fk.nccl(fk.lib(), fk.lib(fk.SYSTEM, "2.18.3", ("ldconfig",)), loader=fk.SYSTEM)
    by_code = {
        f.code: f
        for f in findings(
            nccl_drift, fk.node("a", nccl=one), fk.node("b", nccl=one), fk.node("c", nccl=two)
        )
    }
    assert by_code["drift.nccl"].summary == (
        "NCCL versions reachable differs on c: 2.18.3, 2.27.7 instead of 2.27.7"
    )
    assert by_code["drift.nccl_net_plugins"].summary == (
        "NCCL net plugins differs on c: none instead of libnccl-net.so"
    )


def test_software_drift_codes() -> None:
    same = dict(system=fk.system(), frameworks=fk.torch(), mpi=fk.mpi())
    odd = fk.node(
        "n3",
        system=fk.system(python="3.10.12", kernel="5.15.0-1"),
        frameworks=fk.torch("2.6.0+cu124"),
        mpi=fk.mpi("MPICH", "4.0.2"),
    )
    result = findings(software_drift, fk.node("n1", **same), fk.node("n2", **same), odd)
    assert sorted(f.code for f in result) == [
        "drift.kernel",
        "drift.mpi",
        "drift.python",
        "drift.torch",
    ]
    mpi = next(f for f in result if f.code == "drift.mpi")
    assert mpi.summary == "MPI differs on n3: MPICH 4.0.2 instead of Open MPI 4.1.6"


def test_all_agree_passes() -> None:
    same = dict(system=fk.system(), frameworks=fk.torch(), mpi=fk.mpi(), env={"NCCL_DEBUG": "WARN"})
    (result,) = run_checks([software_drift], fk.cluster(fk.node("a", **same), fk.node("b", **same)))
    assert result.status is Status.PASS


def test_nccl_env_drift_one_finding_per_variable() -> None:
    a = fk.node("a", env={"NCCL_IB_DISABLE": "0", "NCCL_DEBUG": "WARN", "PATH": "/bin"})
    b = fk.node("b", env={"NCCL_IB_DISABLE": "0", "NCCL_DEBUG": "WARN", "PATH": "/usr/bin"})
    c = fk.node("c", env={"NCCL_IB_DISABLE": "1", "PATH": "/bin"})
    result = findings(nccl_settings_drift, a, b, c)
    summaries = sorted(f.summary for f in result)
    assert summaries == [
        "NCCL_DEBUG differs on c: <unset> instead of WARN",
        "NCCL_IB_DISABLE differs on c: 1 instead of 0",
    ]
    debug = next(f for f in result if "NCCL_DEBUG" in f.summary)
    assert debug.fix is not None and debug.fix.commands == ("export NCCL_DEBUG=WARN",)


def test_nccl_conf_drift_merges_user_over_system() -> None:
    system = NcclConf("/etc/nccl.conf", "system", (("NCCL_SOCKET_IFNAME", "eth0"),))
    user = NcclConf("/root/.nccl.conf", "user", (("NCCL_SOCKET_IFNAME", "ib0"),))
    plain = fk.nccl(fk.lib(), conf=(system,))
    overridden = fk.nccl(fk.lib(), conf=(user, system))
    result = findings(
        nccl_settings_drift,
        fk.node("a", nccl=plain, env={}),
        fk.node("b", nccl=plain, env={}),
        fk.node("c", nccl=overridden, env={}),
    )
    (finding,) = result
    assert finding.code == "drift.nccl_conf"
    assert finding.summary == (
        "nccl.conf settings differs on c: NCCL_SOCKET_IFNAME=ib0 instead of NCCL_SOCKET_IFNAME=eth0"
    )


def test_real_captures_as_three_nodes() -> None:
    """Three real captures of this machine as nodes: one has an extra NCCL on LD_LIBRARY_PATH."""
    nodes = [
        fk.real("cpu-torch-wheel", "node1"),
        fk.real("cpu-torch-import", "node2"),
        fk.real("cpu-two-nccl", "node3"),
    ]
    result = findings(nccl_drift, *nodes)
    assert [(f.code, f.nodes) for f in result] == [("drift.nccl", ("node3",))]
    assert (
        result[0].summary
        == "NCCL versions reachable differs on node3: 2.21.5, 2.32.3 instead of 2.32.3"
    )
    assert findings(software_drift, *nodes) == ()
    assert findings(nccl_settings_drift, *nodes) == ()
