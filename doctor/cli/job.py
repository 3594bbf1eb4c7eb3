"""`doctor run -- COMMAND` and `doctor stacks`: a training job, launched behind the preflight's
gate (doctor/job/), or looked at while it runs: where every rank is."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from doctor.cli.common import progress, reaching, select_checks
from doctor.job.settings import HangSettings, StacksSettings
from doctor.nodes.targets import Targets
from doctor.pipeline.request import (
    AllreduceSettings,
    CheckSettings,
    ProbeSettings,
    Profile,
    Request,
    RunSettings,
    StageSettings,
)
from doctor.render.hostlists import HostLists
from doctor.render.output import OutputOptions, emit


def run_job(
    output: OutputOptions,
    checks: CheckSettings,
    probe: ProbeSettings,
    targets: Targets,
    stages: StageSettings,
    allreduce: AllreduceSettings,
    settings: RunSettings,
    hang: HangSettings,
    lists: HostLists,
    launch: Annotated[
        list[str] | None,
        typer.Argument(help="The launch command, after --: torchrun ..., mpirun ..., srun ..."),
    ] = None,
) -> int:
    """Preflight the nodes a launch command will use, then launch it with the fix applied."""
    from doctor.job.argv import parse_launch
    from doctor.job.command import QUICK_SIZES, run_command, stages_for, targets_for
    from doctor.job.show import show_job

    line = parse_launch(launch or [])
    quick = settings.profile is Profile.quick
    request = Request(
        "run",
        targets=targets_for(targets, line),
        probe=probe,
        stages=stages_for(stages, settings.profile, line),
        allreduce=replace(allreduce, sizes=QUICK_SIZES if quick else allreduce.sizes)
        if stages.allreduce
        else None,
        checks=select_checks(checks.include, checks.exclude),
        baseline=checks.baseline,
        thresholds=checks.thresholds(),
        nics_section=True,
    )
    report, verdict, result = run_command(
        launch or [], line, request, settings, hang, output.threshold, progress(), lists
    )
    return show_job(report, verdict, result, output)


def stacks(output: OutputOptions, targets: Targets, settings: StacksSettings) -> int:
    """Where every rank of a running job is: the rank that holds the others, its node and line."""
    with reaching(targets) as (nodes, transport):
        from doctor.job.stacks import look_at_job  # while the handshakes go on

        checks = select_checks(["hang", "reach"], plugins=("hang", "cluster"))
        report = look_at_job(nodes, transport, settings, checks, targets.python)
    return emit(report, output)
