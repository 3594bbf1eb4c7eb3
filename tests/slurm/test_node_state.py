"""slurm.node under a real SLURM: a node drained while the job holds it is named with the reason
the admin gave; the others pass."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.cluster.slurm import Slurm
from tests.slurm.conftest import DOCTOR

pytestmark = pytest.mark.cluster

# Inside the allocation: drain node2 (it stays allocated: DRAIN while the job runs), preflight,
# then return it to service whatever the preflight said.
SCRIPT = """
scontrol update nodename=node2 state=drain reason='doctor-test: bad fan'
{doctor} preflight -f json --no-allreduce --select slurm.node
scontrol update nodename=node2 state=resume
"""


def test_a_drained_node_is_named_with_its_reason(slurm: Slurm) -> None:
    doctor = " ".join(shlex.quote(a) for a in DOCTOR)
    proc = slurm.client(
        [
            "salloc",
            "-N3",
            "-w",
            "node[1-3]",
            "--immediate=20",
            "sh",
            "-c",
            SCRIPT.format(doctor=doctor),
        ],
        timeout=180,
    )
    assert proc.stdout.strip().startswith("{"), proc.stderr
    report = json.loads(proc.stdout)
    outcomes = {o["node"]: o for o in report["outcomes"] if o["check"] == "slurm.node"}
    assert set(outcomes) == {"node1", "node2", "node3"}, proc.stderr
    assert outcomes["node1"]["status"] == outcomes["node3"]["status"] == "pass"
    (finding,) = outcomes["node2"]["findings"]
    assert finding["code"] == "slurm.node.drain"
    assert "DRAIN" in finding["summary"] and "doctor-test: bad fan" in finding["summary"]
    assert "node2" not in {n for n, s in slurm.node_states().items() if "drain" in s}
