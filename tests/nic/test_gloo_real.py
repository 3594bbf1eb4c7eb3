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
# hostname's) for each [hosts file, value] case in argv[1] (value null = unset), and prints per
# case the addresses their listeners bound, or Gloo's error. It writes the namespace's own
# /etc/hosts (bind-mounted from /etc/netns/<ns>/hosts) between cases: one torch import for all.
GLOO_DEVICES = """
import json, sys, psutil
from torch._C._distributed_c10d import ProcessGroupGloo as G
me = psutil.Process()
out = []
for hosts, names in json.loads(sys.argv[1]):
    with open("/etc/hosts", "w") as handle:
        handle.write(hosts)
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
# 127.0.1.1 is the Debian /etc/hosts trap; the node's real address is the fix.
HOSTS = [f"127.0.0.1 localhost\n{a} {socket.gethostname()}\n" for a in ("127.0.1.1", "198.18.1.1")]


@pytest.fixture(scope="module")
def node() -> Iterator[Netns]:
    with netns("nicg") as ns:
        ns.add_nic("eth0", "198.18.1.1/24")
        ns.add_nic("eth1", "198.19.1.1/24")
        ns.set_hosts(HOSTS[0])
        yield ns


def test_gloo_binds_where_predicted(node: Netns) -> None:
    cases = [(hosts, value) for hosts in HOSTS for value in VALUES]
    predicted = []
    for hosts, value in cases:
        node.set_hosts(hosts)
        predicted.append(plan_in(node, **({"GLOO_SOCKET_IFNAME": value} if value else {})).gloo)
    proc = node.run(
        [sys.executable, "-c", GLOO_DEVICES, json.dumps(cases)], env=scenario_env(), timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    assert real[0] == {"addresses": ["127.0.1.1"]}  # the trap, for real
    for (_, value), gloo, got in zip(cases, predicted, real, strict=True):
        if "error" in got:
            assert value == "ib9" and "Unable to find address for: ib9" in got["error"]
            error = gloo.bindings[0].error
            assert error is not None and error.startswith("Unable to find address for: ib9")
        else:
            assert got == {"addresses": sorted(str(b.address) for b in gloo.bindings)}, value
