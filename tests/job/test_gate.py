"""The gate on facts probed from a real namespace: what the recommended environment fixes lets
the job go, what it cannot fix stops it."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from doctor.core.model import Severity
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.job.gate import Verdict, judge
from doctor.judge.registry import load_checks, select
from doctor.judge.report import Report
from doctor.judge.runner import run_checks
from doctor.pipeline.steps import NOT_TESTED, derive
from tests.cluster.netns import netns
from tests.nic.scenarios import facts_in

pytestmark = pytest.mark.cluster

SPECS = tuple(select(load_checks(), ["nics.gloo", "shm.size"], ()))


@pytest.fixture(scope="module")
def probed() -> tuple[NodeFacts, NodeFacts]:
    """This host's name on 127.0.1.1 (the Debian default), and on the node's real address."""
    host = socket.gethostname()
    with netns("gate") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.set_hosts(f"127.0.0.1 localhost\n127.0.1.1 {host}\n")
        trap = facts_in(ns)
        ns.set_hosts(f"127.0.0.1 localhost\n198.18.1.1 {host}\n")
        return trap, facts_in(ns)


def gate(*facts: NodeFacts, fail_on: Severity = Severity.FAIL) -> tuple[Report, Verdict]:
    nodes = {f"n{i}": dataclasses.replace(f, node=f"n{i}") for i, f in enumerate(facts)}
    cluster = ClusterFacts(nodes=derive(nodes, NOT_TESTED))
    report = Report.build("run", cluster, run_checks(SPECS, cluster))
    return report, judge(report, SPECS, fail_on)


def test_gloo_on_loopback_is_fixed_by_the_interface_it_sets(
    probed: tuple[NodeFacts, NodeFacts],
) -> None:
    trap, fixed = probed
    report, verdict = gate(trap, fixed)
    assert "gloo.iface.loopback" in {f.code for f in report.findings}
    assert verdict.passed and "gloo.iface.loopback" in {f.code for f in verdict.fixed}
    assert verdict.env["n0"]["GLOO_SOCKET_IFNAME"] == "eth0"


def test_what_no_environment_fixes_stops_the_launch(probed: tuple[NodeFacts, NodeFacts]) -> None:
    trap, fixed = probed
    limits = dataclasses.replace(fixed.limits, shm_size=64 << 20)
    small = dataclasses.replace(fixed, limits=limits)
    _, verdict = gate(trap, small)
    assert not verdict.passed
    assert [(f.code, f.nodes) for f in verdict.blocking] == [("shm.too_small", ("n1",))]
    assert "gloo.iface.loopback" in {f.code for f in verdict.fixed}
