"""The probe's topo section on real sysfs: inside a network namespace, software NICs are no NICs.

`ip netns exec` remounts /sys for the namespace, so /sys/class/net lists only its interfaces:
a veth pair and a bridge here, none of which has a PCI device behind it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import doctor
from doctor.core.capture import Capture
from doctor.facts.topo.topology import TopoFacts, parse_topo
from tests.cluster.netns import netns

PROBE = str(Path(doctor.__file__).parent / "stages" / "probe.py")


@pytest.mark.cluster
def test_virtual_interfaces_are_not_nics() -> None:
    with netns("cdtopo") as ns:
        ns.add_veth_pair("tva", "tvb")
        ns.add_bridge("tbr0", "198.18.7.1/24")
        result = ns.run([sys.executable, PROBE, '{"deadline": 10}'], check=True)
    raw = json.loads(result.stdout)
    assert raw["dirs"]["/sys/class/net"]["entries"] == sorted(["lo", "tva", "tvb", "tbr0"])
    # no "device" link, so the probe records no realpath for them
    assert not [k for k in raw["values"] if k.startswith("realpath:/sys/class/net/")]
    facts = parse_topo(Capture(raw))
    assert isinstance(facts, TopoFacts), facts
    assert facts.nics == ()
    assert facts.topology.nics == ()
