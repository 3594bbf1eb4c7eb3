"""`doctor preflight` and `doctor allreduce`: reach the nodes, probe and test them, judge, report.

`doctor preflight --local --prolog` is the SLURM prolog: this node only, one reason line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from doctor.cli.common import reaching, run, select_checks
from doctor.core.errors import UsageError
from doctor.nodes.targets import Targets
from doctor.pipeline.request import (
    AllreduceSettings,
    CheckSettings,
    ProbeSettings,
    Request,
    StageSettings,
)
from doctor.render.hostlists import HostLists
from doctor.render.output import OutputOptions, emit, ui


def preflight(
    output: OutputOptions,
    checks: CheckSettings,
    probe: ProbeSettings,
    targets: Targets,
    stages: StageSettings,
    allreduce: AllreduceSettings,
    lists: HostLists,
    prolog: Annotated[
        bool,
        typer.Option(
            "--prolog", help="With --local: a SLURM Prolog; exit 1 (drain) with one reason line."
        ),
    ] = False,
) -> int:
    """Check this node (and, with hosts, every node) before launching training."""
    if prolog:
        from doctor.pipeline.prolog import run_prolog

        if not targets.local:
            raise UsageError("--prolog checks only this node: use it with --local")
        specs = list(select_checks(checks.include, checks.exclude))
        return run_prolog(specs, output.threshold, probe=probe)
    with reaching(targets) as reached:
        request = Request(
            "preflight",
            targets=targets,
            probe=probe,
            stages=stages,
            allreduce=allreduce if stages.allreduce else None,
            checks=select_checks(checks.include, checks.exclude),
            baseline=checks.baseline,
            nics_section=True,
        )
        report = run(request, reached)
    lists.write(report, ui().quiet)
    return emit(report, output)


def allreduce(output: OutputOptions, targets: Targets, settings: AllreduceSettings) -> int:
    """Run a real allreduce: phases, exact verification, a size sweep, the slow node."""
    with reaching(targets) as reached:
        request = Request(
            "allreduce",
            targets=targets,
            allreduce=replace(settings, ranks=settings.ranks or 2),
            checks=select_checks(["allreduce"]),
        )
        report = run(request, reached)
    return emit(report, output)
