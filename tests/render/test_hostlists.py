"""Launch-ready lists (--healthy-hosts, --failed-hosts) and each node's own verdict in the JSON."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import hostlist
import pytest

from doctor.core.errors import UsageError
from doctor.core.model import CheckOutcome, Finding, NodeFailure, Severity, Status
from doctor.facts.cluster import ClusterFacts
from doctor.judge.report import Report
from doctor.nodes.inventory import build_inventory
from doctor.render.hostlists import HostLists, failed_hosts, healthy_hosts
from doctor.render.json_report import validate

# A hostfile as people write them: MPI/DeepSpeed slots, Horovod's host:N, a user, a comment.
HOSTFILE = """\
# the job's nodes
node01 slots=8   # first rack
node02:8
alice@node03 slots=8
node07
node08 slots=4
node09
node10
"""


def inventory(tmp_path: Path, text: str = HOSTFILE) -> dict[str, object]:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(text)
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    return {n.name: n for n in build_inventory(hostfile=hostfile, ssh_config=empty)}


def finding(code: str, severity: Severity, *nodes: str) -> Finding:
    summary = f"{code} on {','.join(nodes) or 'the cluster'}"
    return Finding(code, severity, summary, nodes, check="test")


def report(tmp_path: Path, *findings: Finding, failures: tuple[str, ...] = ()) -> Report:
    nodes = inventory(tmp_path)
    cluster = ClusterFacts(
        nodes={},
        failures={n: NodeFailure(n, "ssh.timeout", f"{n} did not answer") for n in failures},
        inventory=nodes,  # type: ignore[arg-type]
    )
    outcome = CheckOutcome("test", Status.FAIL, None, findings)
    return Report.build("preflight", cluster, [outcome])


def test_healthy_nodes_are_written_as_given_and_failed_ones_as_a_slurm_hostlist(
    tmp_path: Path,
) -> None:
    r = report(
        tmp_path,
        finding("mesh.timeout", Severity.FAIL, "node03", "node08"),
        finding("allreduce.slow_node", Severity.WARN, "node02"),
        finding("limits.memlock", Severity.INFO, "node01"),
        failures=("node09",),  # unreachable, its check not selected: still failed
    )
    assert healthy_hosts(r) == ["node01 slots=8", "node02:8", "node07", "node10"]
    assert failed_hosts(r) == ["node03", "node08", "node09"]
    HostLists(tmp_path / "healthy", tmp_path / "failed").write(r)
    assert (tmp_path / "healthy").read_text() == "node01 slots=8\nnode02:8\nnode07\nnode10\n"
    written = (tmp_path / "failed").read_text()
    assert written == "node[03,08-09]\n"
    # What srun --exclude reads back is exactly the failed nodes.
    assert hostlist.expand_hostlist(written.strip()) == ["node03", "node08", "node09"]


def test_a_cluster_wide_finding_fails_no_node_and_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = report(tmp_path, finding("allreduce.failed", Severity.FAIL))
    assert len(healthy_hosts(r)) == 7 and failed_hosts(r) == []
    HostLists(tmp_path / "healthy", tmp_path / "failed").write(r)
    assert (tmp_path / "failed").read_text() == ""
    err = capsys.readouterr().err
    assert "7 healthy node(s) written" in err and "0 failed node(s) written" in err
    assert "in neither list: allreduce.failed (names no node)" in err
    assert r.exit_code() != 0  # the report still fails


def test_every_node_has_its_own_verdict_and_codes_in_the_json(tmp_path: Path) -> None:
    r = report(
        tmp_path,
        finding("mesh.timeout", Severity.FAIL, "node03"),
        finding("allreduce.slow_start", Severity.WARN, "node03", "node07"),
        finding("allreduce.failed", Severity.FAIL),
        failures=("node09",),
    )
    doc = r.to_json()
    validate(doc)
    verdicts = {n: (v["verdict"], v["codes"]) for n, v in doc["nodes"].items()}
    assert verdicts == {
        "node01": ("pass", []),
        "node02": ("pass", []),
        "node03": ("fail", ["mesh.timeout", "allreduce.slow_start"]),
        "node07": ("warn", ["allreduce.slow_start"]),
        "node08": ("pass", []),
        "node09": ("fail", ["ssh.timeout"]),
        "node10": ("pass", []),
    }


def test_an_unwritable_list_is_a_usage_error(tmp_path: Path) -> None:
    r = report(tmp_path)
    with pytest.raises(UsageError, match="--failed-hosts"):
        HostLists(failed=tmp_path / "no" / "such" / "dir" / "failed").write(r)


def test_nodes_given_by_h_keep_their_slots_and_user(tmp_path: Path) -> None:
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    nodes = build_inventory(hosts="bob@gpu1:8, gpu2,gpu3:4", ssh_config=empty)
    assert [n.given for n in nodes] == ["bob@gpu1:8", "gpu2", "gpu3:4"]
    # The form a node was given in is not part of its identity.
    assert dataclasses.replace(nodes[0], given="gpu1") == nodes[0]
