"""Live: a namespace built here; its `ip -d a`, `ip a`, `ip -br a`, `ifconfig -a` pasted against
its probe."""

from __future__ import annotations

import json
import sys

import pytest

from doctor.core.capture import Capture
from doctor.facts.network.net import NetFacts, parse_net
from tests.cluster.netns import netns
from tests.paste.pastekit import read_text

pytestmark = pytest.mark.cluster

PROBE = "import json, doctor.stages.probe as p; print(json.dumps(p.collect()))"


def test_pasted_outputs_classify_as_the_probe_does() -> None:
    with netns("pst") as ns:
        ns.add_nic("eth0", "198.18.7.5/24")
        ns.add_veth_pair("vA", "vB")
        ns.add_bridge("br0", "198.18.8.1/24")
        ns.ip("link", "set", "vA", "master", "br0")
        ns.ip("link", "add", "link", "eth0", "name", "mv0", "type", "macvlan", "mode", "bridge")
        ns.ip("addr", "add", "198.18.7.6/24", "dev", "mv0")
        ns.ip("link", "set", "mv0", "up")
        ns.add_nic("off0", "198.18.9.1/24", up=False)
        ns.ip("link", "add", "ll0", "type", "veth", "peer", "name", "ll1")
        ns.ip("addr", "add", "169.254.9.9/16", "dev", "ll0")
        ns.ip("link", "set", "ll0", "up")  # its peer is down: NO-CARRIER
        outputs = {
            cmd: ns.run(cmd.split(), check=True).stdout
            for cmd in ("ip -d addr", "ip addr", "ip -br addr", "ifconfig -a", "busybox ip a")
        }
        probed = parse_net(Capture(json.loads(ns.run([sys.executable, "-c", PROBE]).stdout)))
    assert isinstance(probed, NetFacts)
    for cmd, text in outputs.items():
        pasted = parse_net(read_text(f"$ {cmd}\n{text}"))
        assert isinstance(pasted, NetFacts), cmd
        assert set(pasted.interfaces) == set(probed.interfaces), cmd
        for name, iface in probed.interfaces.items():
            mine = pasted.interfaces[name]
            assert mine.state() == iface.state(), (cmd, name)
            assert sorted(a.text() for a in mine.addresses) == sorted(
                a.text() for a in iface.addresses
            ), (cmd, name)
            if cmd == "ip -d addr":  # the details name every kind and role
                assert (mine.kind, mine.master, mine.slave_kind) == (
                    iface.kind,
                    iface.master,
                    iface.slave_kind,
                ), (cmd, name)
            elif cmd in ("ip addr", "ip -br addr"):  # eth0@ifN: the peer elsewhere, a veth
                assert mine.kind in (iface.kind, "unknown"), (cmd, name)
            else:  # ifconfig and busybox show no peer: a guess from the name may miss, and says so
                assert mine.kind in (iface.kind, "unknown") or mine.kind_from == "name", (cmd, name)
    assert probed.interfaces["ll0"].state() == "no-carrier"
    assert probed.interfaces["off0"].state() == "down"
