"""`doctor preflight -H ...` end to end on a real 3-node cluster (network namespaces, real sshd)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from doctor import __version__
from doctor.cli.main import main
from doctor.render.json_report import validate
from doctor.render.matrix import render_matrix

pytestmark = pytest.mark.cluster


def preflight(c, capsys, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    # The nodes' login python3 is Debian's, without torch; name the one that has it, as users
    # do with --python, so that preflight's closing allreduce can run.
    rc = main(
        ["preflight", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config), "-f", "json",
         "--python", sys.executable, *extra]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    validate(report)  # every report these tests see keeps the shipped schema
    return rc, report


def codes(report: dict) -> dict[str, list[str]]:
    return {f["code"]: f["nodes"] for f in report["findings"]}


def fully_reported(report: dict, names: list[str]) -> None:
    for name in names:
        node = report["nodes"][name]
        assert node["status"] == "ok", node
        assert node["facts"]["system"]["hostname"] == name


def test_healthy_cluster_is_clean(new_cluster, capsys):
    c = new_cluster(3)
    rc, report = preflight(c, capsys)
    assert rc == 0, report["findings"]
    assert report["findings"] == []
    fully_reported(report, c.names)
    mesh = report["ssh_mesh"]
    assert mesh["nodes"] == c.names and mesh["failures"] == []
    assert mesh["matrix"]["node2"] == {"node1": "ok", "node3": "ok"}
    statuses = {o["check"]: o["status"] for o in report["outcomes"]}
    for check in ("ssh.mesh", "names.resolve", "identity.unique", "clock.skew", "node.reach"):
        assert statuses[check] == "pass", check


def test_one_way_ssh_is_named_with_direction_and_fix(new_cluster, capsys):
    c = new_cluster(3)
    c.break_ssh_one_way("node2", "node3")
    rc, report = preflight(c, capsys)
    assert rc == 1
    [finding] = [f for f in report["findings"] if f["check"] == "ssh.mesh"]
    assert finding["code"] == "mesh.publickey_denied"
    assert finding["summary"].startswith(
        "SSH node2 → node3 fails: node3 does not accept node2's key"
    )
    assert "node3 → node2 works (one way only)" in finding["summary"]
    assert finding["fix"]["commands"] == [
        "ssh node2 'cat ~/.ssh/id_*.pub' | ssh node3 'cat >> ~/.ssh/authorized_keys'"
    ]
    assert report["ssh_mesh"]["matrix"]["node2"]["node3"] == "publickey_denied"
    assert report["ssh_mesh"]["matrix"]["node3"]["node2"] == "ok"


def test_sshd_down_on_one_node(new_cluster, capsys):
    c = new_cluster(3)
    c.stop_sshd("node2")
    rc, report = preflight(c, capsys)
    assert rc == 1
    found = codes(report)
    assert found["ssh.refused"] == ["node2"]
    # node2 is named once; the mesh runs among the nodes that answered, so it blames no other.
    assert "mesh.refused" not in found
    assert sorted(report["ssh_mesh"]["nodes"]) == ["node1", "node3"]
    assert report["nodes"]["node2"]["status"] == "failed"
    fully_reported(report, ["node1", "node3"])
    [reach] = [f for f in report["findings"] if f["code"] == "ssh.refused"]
    assert "Start sshd on node2" in reach["fix"]["text"]


def test_blackholed_node_ends_within_deadline(new_cluster, capsys):
    c = new_cluster(3)
    c.blackhole("node3")
    started = time.monotonic()
    rc, report = preflight(c, capsys, "--connect-timeout", "2")
    elapsed = time.monotonic() - started
    assert elapsed < 12, elapsed  # connect 2 s, plus the probe and the stages of the others
    assert rc == 1
    found = codes(report)
    assert found["ssh.timeout"] == ["node3"]
    assert "mesh.timeout" not in found  # named once, by the controller's own attempt
    fully_reported(report, ["node1", "node2"])
    assert report["summary"]["nodes_failed"] == 1


def test_hostname_on_loopback(new_cluster, capsys):
    c = new_cluster(3)
    c.hostname_loopback("node1")
    rc, report = preflight(c, capsys)
    assert rc == 1
    [f] = [f for f in report["findings"] if f["code"] == "names.loopback"]
    assert f["nodes"] == ["node1"]
    assert f["summary"].startswith("node1 resolves its own name node1 to 127.0.1.1")
    assert (
        f"echo '{c.node('node1').address} node1' | sudo tee -a /etc/hosts" in f["fix"]["commands"]
    )


def test_name_missing_on_one_node(new_cluster, capsys):
    c = new_cluster(3)
    c.unresolvable_on("node2", "node3")
    rc, report = preflight(c, capsys)
    assert rc == 1
    found = codes(report)
    assert found["names.unresolvable"] == ["node2"]
    assert found["mesh.unresolvable"] == ["node2", "node3"]


def test_different_version_on_one_node_is_named(new_cluster, capsys, tmp_path):
    c = new_cluster(3)
    # The site-packages of the interpreter the probe runs with on the node (--python).
    site = c.ssh(
        "node2", f"{sys.executable} -c 'import site; print(site.getsitepackages()[0])'"
    ).stdout
    fake = tmp_path / "site"
    meta = fake / "cluster_doctor-0.0.9.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: cluster-doctor\nVersion: 0.0.9\n")
    c.bind_mount("node2", fake, site.strip())
    # The mount hides node2's torch; the allreduce would rightly fail, which is not this test.
    rc, report = preflight(c, capsys, "--no-allreduce")
    assert rc == 0  # a warning: the probe that ran is the controller's own
    [f] = [f for f in report["findings"] if f["code"] == "doctor.version_differs"]
    assert f["nodes"] == ["node2"]
    assert f["summary"] == f"node2 have cluster-doctor 0.0.9; this controller runs {__version__}"


def test_terminal_matrix_shows_the_broken_link(new_cluster, capsys):
    c = new_cluster(3)
    c.break_ssh_one_way("node2", "node3")
    _, report = preflight(c, capsys)
    console = Console(width=80, record=True, color_system=None)
    render_matrix("SSH mesh", report["ssh_mesh"], console)
    lines = console.export_text().splitlines()
    assert lines[-3:] == ["   2 node2 . - K", "   3 node3 . . -", "     K publickey_denied"]


def test_unreadable_hostfile_is_a_usage_error(tmp_path: Path, capsys):
    (tmp_path / "hosts").write_text("a slots=2\na slots=2\n")
    assert main(["preflight", "--hostfile", str(tmp_path / "hosts")]) == 2
    err = capsys.readouterr().err
    assert "line 2 of" in err and "duplicate host 'a'" in err


def test_collect_over_ssh_saves_every_reachable_node(new_cluster, capsys, tmp_path):
    c = new_cluster(3)
    c.stop_sshd("node3")
    out = tmp_path / "bundle"
    rc = main(
        ["collect", "-H", c.hosts_arg(), "--ssh-config", str(c.ssh_config), "--save-raw", str(out)]
    )
    assert rc == 1  # one node could not be collected, and the run says so
    assert sorted(p.name for p in out.iterdir()) == ["node1.json", "node2.json"]
    assert "node3: connection to 198.18." in capsys.readouterr().err
    assert main(["analyze", str(out), "-f", "json"]) in (0, 1)
    assert set(json.loads(capsys.readouterr().out)["nodes"]) == {"node1", "node2"}


def test_open_mpi_fix_names_the_subnet_where_interface_names_differ(new_cluster, capsys):
    c = new_cluster(3)
    c.rename_interface("node2", "ens5")
    c.add_docker0(["node1", "node3"])
    rc, report = preflight(c, capsys, "--no-allreduce")
    assert rc == 0  # warnings only: names may differ, when every library is told so
    found = codes(report)
    assert found["nic.names_differ"] == ["node1", "node2", "node3"], report["findings"]
    [mpi] = [
        f
        for f in report["findings"]
        if f["code"] == "mpi.iface.container" and "btl_tcp" in f["summary"]
    ]
    subnet = f"{c.subnet}.0/24"
    # One mpirun serves every node: `btl_tcp_if_include eth0` would leave node2 without one.
    assert mpi["fix"]["commands"] == [f"mpirun --mca btl_tcp_if_include {subnet} ..."]
    [names] = [f for f in report["findings"] if f["code"] == "nic.names_differ"]
    assert (
        f"mpirun --mca btl_tcp_if_include {subnet} --mca oob_tcp_if_include {subnet} ..."
        in (names["fix"]["commands"])
    )
    recommendation = report["nics"]["recommendation"]
    assert recommendation["NCCL_SOCKET_IFNAME"] == "=ens5,eth0"
    assert recommendation["OMPI_MCA_btl_tcp_if_include"] == subnet
