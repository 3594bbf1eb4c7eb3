"""The fault matrix on the namespace test bed: each scenario under each command, measured against
the doctor's promises (docs/reliability.md is generated from what these tests record)."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster
from tests.cluster.slurm import Slurm
from tests.faults.builders import slurmd_revived
from tests.faults.results import record
from tests.faults.runner import check_files, run_doctor
from tests.faults.scenarios import CASES, Scenario, doctor_argv

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(
    ("scenario", "command"), CASES, ids=[f"{s.name}-{cmd}" for s, cmd in CASES]
)
def test_fault(
    fault_cluster: Cluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    scenario: Scenario,
    command: str,
) -> None:
    c = fault_cluster
    out = tmp_path / "out"
    out.mkdir()
    with contextlib.ExitStack() as stack:
        env = None
        if command == "srun":
            slurm: Slurm = request.getfixturevalue("fault_slurm")
            env = slurm.env
            stack.enter_context(slurmd_revived(slurm, "node3"))
        stack.enter_context(scenario.fault(c, tmp_path))
        figures = run_doctor(
            c,
            doctor_argv(c, command, out),
            outputs=[out],
            faulty=scenario.faulty,
            trigger=scenario.trigger,
            timeout=scenario.deadline(command) + 60,
            env=env,
        )
        if command == "collect":  # its report is the captures it saved, one file per node
            saved = check_files([out])
            figures.reported = sorted(
                f.removesuffix(".json") for f, v in saved.items() if v == "whole"
            )
    taken = figures.since_trigger if scenario.interrupts else figures.seconds
    row = {
        "scenario": scenario.name,
        "what": scenario.what,
        "command": command,
        "deadline": scenario.deadline(command),
        "deadline_from": "Ctrl-C" if scenario.interrupts else "start",
        "taken": taken,
        "healthy": scenario.healthy(),
        **{k: v for k, v in asdict(figures).items() if k != "stderr"},
    }
    record("faults", row)
    detail = f"{row}\nstderr: {figures.stderr}"
    if scenario.trigger is not None:
        assert figures.triggered, f"the trigger never fired: {detail}"
    assert figures.exit_code in scenario.exits, detail
    assert taken is not None and taken <= scenario.deadline(command), detail
    assert figures.leftovers == [], detail
    assert figures.blamed == [], detail
    assert scenario.named <= set(figures.failed), detail
    assert figures.files_whole, detail
    if not scenario.interrupts and scenario.exits != {2}:
        missing = set(scenario.healthy()) - set(figures.reported)
        assert not missing, f"healthy nodes not reported: {missing}\n{detail}"
    assert "Traceback" not in figures.stderr, detail
