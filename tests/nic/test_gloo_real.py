"""The predicted Gloo address equals the one real torch Gloo devices listen on, in a namespace."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator

import pytest

from tests.cluster.netns import Netns, netns
from tests.nic.scenarios import plan_in, scenario_env

pytestmark = pytest.mark.cluster

# Builds Gloo devices the way ProcessGroupGloo does (one per GLOO_SOCKET_IFNAME name, else the
# hostname's) for each value in argv[1] (a JSON list; null = unset), and prints per value the
# addresses their listeners bound, or Gloo's error. One process: importing torch takes seconds.
GLOO_DEVICES = """
import json, sys, psutil
from torch._C._distributed_c10d import ProcessGroupGloo as G
me = psutil.Process()
out = []
for names in json.loads(sys.argv[1]):
    before = {c.laddr for c in me.net_connections("inet")}
    try:
        if names and len(names) > 1:
            devices = [G.create_device(interface=n) for n in names.split(",")]
        else:
            devices = [G.create_default_device()]
    except RuntimeError as exc:
        out.append({"error": str(exc)})
        continue
    out.append({"addresses": sorted(c.laddr.ip for c in me.net_connections("inet")
                                    if c.status == "LISTEN" and c.laddr not in before)})
    del devices
print(json.dumps(out))
"""
VALUES = [None, "eth1", "eth1,eth0", "ib9"]


@pytest.fixture(scope="module")
def node() -> Iterator[Netns]:
    with netns("nicg") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.add_nic("eth1", "198.19.1.1/24")
        yield ns


def real_gloo(ns: Netns) -> list[dict]:
    proc = ns.run(
        [sys.executable, "-c", GLOO_DEVICES, json.dumps(VALUES)], env=scenario_env(), timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    results: list[dict] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


@pytest.mark.parametrize("hosts_address", ["127.0.1.1", "198.18.1.1"])
def test_gloo_binds_where_predicted(node: Netns, hosts_address: str) -> None:
    """127.0.1.1 is the Debian /etc/hosts trap; the real address is the fix."""
    node.set_hosts(f"127.0.0.1 localhost\n{hosts_address} {socket.gethostname()}\n")
    real = real_gloo(node)
    for value, got in zip(VALUES, real, strict=True):
        plan = plan_in(node, **({"GLOO_SOCKET_IFNAME": value} if value else {}))
        if "error" in got:
            assert value == "ib9" and "Unable to find address for: ib9" in got["error"]
            assert plan.gloo.bindings[0].error is not None
            assert plan.gloo.bindings[0].error.startswith("Unable to find address for: ib9")
        else:
            assert got == {"addresses": sorted(str(b.address) for b in plan.gloo.bindings)}, value
