"""Small facts and reports for output tests: raw captures in the probe's format, built by hand.

The captures hold only the entries the facts parsers read (the same keys ``doctor probe``
writes); everything else parses as Missing, as it would from an older probe.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checks.system import CHECKS as SYSTEM_CHECKS
from doctor.cli.main import main
from doctor.core.capture import Capture
from doctor.core.model import Finding, NodeFailure, Severity
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.report import Report
from doctor.judge.runner import run_checks
from doctor.nic.plan import with_plan
from doctor.plugin import CheckSpec, Skip, cluster_check, node_check

MIB = 1 << 20
CREATED = "2026-01-02T03:04:05+00:00"


def raw_capture(
    hostname: str,
    *,
    shm: int = 2048 * MIB,
    env: dict[str, str] | None = None,
    home: str = "/root",
    kernel: str = "6.1.0-18-amd64",
    fqdn: str | None = None,
) -> dict[str, Any]:
    def v(value: Any) -> dict[str, Any]:
        return {"value": value}

    return {
        "probe": {"version": 1},
        "files": {
            "/etc/os-release": {"text": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'},
            "/sys/devices/system/node/online": {"text": "0\n"},
        },
        "values": {
            "hostname": v(hostname),
            "fqdn": v(fqdn or hostname),
            "uname": v(["Linux", hostname, kernel, "#1 SMP", "x86_64", ""]),
            "python": v({"version": "3.11.2", "executable": "/usr/bin/python3"}),
            "cpu_count": v(64),
            "env": v(env or {}),
            "env:container": v(None),
            "exists:/.dockerenv": v(False),
            "exists:/run/.containerenv": v(False),
            "statvfs:/dev/shm": v({"size": shm, "free": shm}),
            "rlimit:RLIMIT_MEMLOCK": v([-1, -1]),
            "time": v(1767323045.0),
            "user": v({"home": home, "uid": 1000}),
        },
    }


def node(name: str, **kw: Any) -> NodeFacts:
    return with_plan(parse_node(name, Capture(raw_capture(name, **kw))))


@node_check(
    "test.addresses",
    "Test check that quotes the node's addresses in a finding",
    codes={"test.address_seen": "an address was quoted"},
)
def addresses_check(facts: NodeFacts) -> Iterator[Finding]:
    env = facts.env if isinstance(facts.env, dict) else {}
    if "MASTER_ADDR" in env:
        yield Finding(
            "test.address_seen",
            Severity.INFO,
            f"{facts.node} will rendezvous at {env['MASTER_ADDR']}",
            evidence=tuple(f"{k}={v} on {facts.node}" for k, v in sorted(env.items())),
        )


@node_check("test.crashes", "Test check that raises", codes={})
def crashing_check(facts: NodeFacts) -> Iterator[Finding]:
    raise RuntimeError(f"boom on {facts.node}")


@cluster_check("test.skips", "Test check whose facts are missing", codes={})
def skipping_check(cluster: ClusterFacts) -> Iterator[Finding]:
    raise Skip("no ssh mesh stage in this run")


ALL_CHECKS: list[CheckSpec] = [*SYSTEM_CHECKS, addresses_check, crashing_check, skipping_check]


def build_report(
    cluster: ClusterFacts,
    specs: list[CheckSpec] | None = None,
    sections: dict[str, Any] | None = None,
    command: str = "preflight",
) -> Report:
    """A report with fixed timings and creation time, so its renderings can be stored."""
    outcomes = run_checks(specs if specs is not None else SYSTEM_CHECKS, cluster)
    outcomes = [dataclasses.replace(o, seconds=0.001 * (i + 1)) for i, o in enumerate(outcomes)]
    report = Report.build(command, cluster, outcomes)
    report.created = CREATED
    report.sections.update(sections or {})
    return report


def sample_cluster() -> ClusterFacts:
    """Three nodes: one with a tiny /dev/shm, one with a small one, one unreachable."""
    cluster = ClusterFacts(
        nodes={
            "gpu01": node(
                "gpu01", shm=64 * MIB, env={"MASTER_ADDR": "198.18.0.1", "USER": "alice"}
            ),
            "gpu02": node("gpu02", shm=512 * MIB),
            "gpu03": node("gpu03"),
        }
    )
    cluster.failures["gpu04"] = NodeFailure(
        "gpu04", "node.timeout", "gpu04 did not answer within 20s", "ssh: connect timed out"
    )
    return cluster


# Shaped like the sections the NIC and SSH-mesh stages add (a map of node to record, a
# recommendation, a matrix, a list of failures) and a topology as a map of node to records.
SAMPLE_SECTIONS: dict[str, Any] = {
    "nics": {
        "nodes": {
            "gpu01": {"nccl": "eth0", "gloo": "eth0", "address": "198.18.0.1/24"},
            "gpu02": {"nccl": "eth0", "gloo": "docker0", "address": "198.18.0.2/24"},
        },
        "recommendation": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"},
    },
    "ssh_mesh": {
        "nodes": ["gpu01", "gpu02"],
        "matrix": {"gpu01": {"gpu02": "ok"}, "gpu02": {"gpu01": "refused"}},
        "failures": [
            {"source": "gpu02", "target": "gpu01", "status": "refused", "message": "denied"}
        ],
        "not_run": {},
    },
    "topology": {
        "gpu01": [{"gpu": 0, "nic": "mlx5_0", "path": "PIX"}],
        "gpu02": [{"gpu": 0, "nic": "mlx5_0", "path": "SYS"}],
    },
}


def sample_report(specs: list[CheckSpec] | None = None) -> Report:
    return build_report(sample_cluster(), ALL_CHECKS if specs is None else specs, SAMPLE_SECTIONS)


def write_captures(folder: Path, shm_by_node: dict[str, int]) -> Path:
    """A capture folder for ``doctor analyze``: one <node>.json per node, with that /dev/shm."""
    folder.mkdir()
    for name, shm in shm_by_node.items():
        (folder / f"{name}.json").write_text(json.dumps(raw_capture(name, shm=shm)))
    return folder


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the doctor in-process: exit code, stdout, stderr."""
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err
