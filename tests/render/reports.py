"""Report documents for the HTML report's tests: the real test-bed runs stored in
tests/fixtures/reports, and a large cluster built from one of them.

``large(n)`` takes the real 3-node slow-link report and spreads it over ``n`` nodes: every node
gets node1's real facts under its own name, with a GPU topology from the ``nvidia-smi topo -m``
fixtures (written from the documented format, not captured); the SSH mesh is complete but for a
one-way failure and a node that could not run it, reachability is sampled by the stage's own
seeded draw (with one timeout), most nodes bind Gloo to 127.0.1.1, and the allreduce's three real
rank rows become ``n``. It is what the report must stay readable for.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doctor.core.jsonable import jsonable
from doctor.facts.topo.smi_text import parse_topo_text
from doctor.stages.pairs import Sampling, choose

if TYPE_CHECKING:
    from tests.cluster.harness import Cluster

FIXTURES = Path(__file__).parent.parent / "fixtures"
REPO = FIXTURES.parent.parent
# The real runs: how each breaks a fresh 3-node test bed before ``doctor preflight`` runs.
SCENARIOS: dict[str, Callable[[Cluster], None]] = {
    "healthy": lambda c: None,
    "one-way-ssh": lambda c: c.break_ssh_one_way("node2", "node3"),
    "slow-link": lambda c: c.shape("node3", "10mbit"),
    # Gloo fails as configured and passes as recommended: two allreduce runs.
    "gloo-loopback": lambda c: c.hostname_loopback("node2"),
    "sshd-down": lambda c: c.stop_sshd("node3"),  # the probe cannot reach node3
}
REPORTS = tuple(SCENARIOS)


def load(name: str) -> dict[str, Any]:
    """A stored real report document."""
    loaded: dict[str, Any] = json.loads((FIXTURES / "reports" / f"{name}.json").read_text())
    return loaded


def preflight(c: Cluster) -> dict[str, Any]:
    """The JSON report of ``doctor preflight`` on the test bed, run as a user runs it."""
    # The nodes' login python3 has no torch: name this one, as users do with --python, so that
    # the closing allreduce runs.
    argv = [sys.executable, "-m", "doctor", "preflight", "-H", c.hosts_arg(), "-f", "json",
            "--ssh-config", str(c.ssh_config), "--python", sys.executable]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=560, cwd=REPO, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def topology(fixture: str) -> dict[str, Any]:
    """An ``nvidia-smi topo -m`` fixture as the report's facts.topo.topology."""
    text = (FIXTURES / "topo" / "smi" / f"{fixture}.txt").read_text()
    result: dict[str, Any] = jsonable(parse_topo_text(text))
    return result


def _names(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(1, n + 1)]


def _finding(code: str, severity: str, summary: str, nodes: list[str], evidence: list[str],
             fix: tuple[str, list[str]] | None) -> dict[str, Any]:  # fmt: skip
    return {
        "check": code.split(".")[0],
        "code": code,
        "severity": severity,
        "summary": summary,
        "nodes": nodes,
        "evidence": evidence,
        "fix": {"text": fix[0], "commands": fix[1]} if fix else None,
        "data": {},
    }


def renamed(value: Any, names: dict[str, str]) -> Any:
    """A JSON value with every whole-word node name replaced (keys and texts alike)."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return json.loads(pattern.sub(lambda m: names[m.group(1)], json.dumps(value)))


def large(n: int = 128) -> dict[str, Any]:
    """An ``n``-node document (n >= 100) built from the real slow-link report (see above)."""
    names = _names(n)
    slow = names[76]
    base = renamed(load("slow-link"), {"node1": names[0], "node2": names[1], "node3": slow})
    doc = copy.deepcopy(base)
    hgx, pcie = (
        topology("hgx-h100-nvswitch-nic-legend"),
        topology("dual-socket-pcie-4gpu-nic-legend"),
    )

    node1 = base["nodes"][names[0]]
    doc["nodes"] = {}
    for i, name in enumerate(names):
        entry = copy.deepcopy(node1)
        entry["facts"]["system"]["hostname"] = name
        entry["facts"]["topo"]["topology"] = hgx if i < 3 * n // 4 else pcie
        entry["facts"]["topo"]["source"] = "nvidia-smi"
        doc["nodes"][name] = entry

    per_node = [o for o in base["outcomes"] if o["node"] == names[0]]
    cluster_wide = [o for o in base["outcomes"] if o["node"] is None]
    doc["outcomes"] = cluster_wide + [dict(o, node=name) for name in names for o in per_node]
    for o in doc["outcomes"]:  # as the planted findings would have them
        if o["check"] == "ssh.mesh" or (o["check"] == "nics.gloo" and o["node"] in names[:100]):
            o["status"] = "fail"

    src, dst = names[6], names[41]
    one_way = renamed(load("one-way-ssh")["findings"][0], {"node2": src, "node3": dst})
    doc["findings"] = [
        _finding(
            "gloo.iface.loopback",
            "fail",
            "GLOO_SOCKET_IFNAME unset; the hostname resolves to 127.0.1.1: Gloo advertises "
            "127.0.1.1, so other nodes connect to themselves and fail",
            names[:100],
            [f"{name}: getaddrinfo({name}) = 127.0.1.1" for name in names[:20]],
            (
                "Name the interface explicitly in GLOO_SOCKET_IFNAME.",
                ["export GLOO_SOCKET_IFNAME=eth0"],
            ),
        ),
        one_way,
        *base["findings"],
    ]
    plan = base["nics"]["nodes"][names[0]]
    doc["nics"]["nodes"] = {name: copy.deepcopy(plan) for name in names}
    for name in names[:100]:
        doc["nics"]["nodes"][name]["gloo"].update(interface="lo", address="127.0.1.1")

    mesh = {s: {t: "ok" for t in names if t != s} for s in names}
    mesh[src][dst] = "publickey_denied"
    not_run = names[99]
    del mesh[not_run]
    doc["ssh_mesh"] = {
        "nodes": names,
        "matrix": mesh,
        "failures": [
            {
                "source": src,
                "target": dst,
                "status": "publickey_denied",
                "message": f"root@{dst}: Permission denied (publickey).",
            }
        ],
        "not_run": {not_run: f"{not_run}: no ssh client on the node"},
        "coverage": choose(names, Sampling.full, 16, seed=0).to_json(),
    }

    sample = choose(names, Sampling.sampled, 32, seed=18)  # the stage's own draw
    address = {name: f"198.18.{i // 250}.{i % 250 + 1}" for i, name in enumerate(names)}
    links = []
    reach: dict[str, dict[str, str]] = {s: {} for s in names}
    for s, peers in sample.peers.items():
        for t in peers:
            status = "timeout" if (s, t) == (names[49], names[50]) else "ok"
            reach[s][t] = status
            links.append({"source": s, "target": t, "iface": "eth0", "address": address[t],
                          "status": status, "seen_from": None, "message": ""})  # fmt: skip
    doc["reachability"] = dict(
        base["reachability"],
        nodes=names,
        interfaces={s: {"eth0": address[s]} for s in names},
        matrix=reach,
        links=links,
        proven={s: ["eth0"] for s in names if s != names[50]} | {names[50]: []},
        not_run={},
        coverage=sample.to_json(),
    )

    for run in doc["allreduce"]["runs"]:
        template = run["ranks"][0]
        run["ranks"] = [
            dict(template, rank=i, node=name, host=name) for i, name in enumerate(names)
        ]
    doc["allreduce"]["world_size"] = n

    counts = {s: 0 for s in ("pass", "warn", "fail", "skip", "crash")}
    for o in doc["outcomes"]:
        counts[o["status"]] += 1
    doc["summary"] = dict(counts, nodes=n, nodes_failed=0)
    return doc
