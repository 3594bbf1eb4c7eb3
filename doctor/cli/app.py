"""The command line: flags -> Request -> pipeline -> rendered report -> exit code.

Every command is a plain function returning its exit code; what it runs is one Request to the
pipeline (doctor/pipeline/steps.py). Flags shared by several commands are declared once, on the
request's dataclasses (doctor/pipeline/request.py, doctor/render/output.py), and expanded here by
``options``. Each command imports what only it uses, so `doctor --version` or `doctor collect` never
pays for the allreduce, the log reader or the renderers (tests/core/test_startup.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from doctor import __version__
from doctor.cli.options import options
from doctor.core.errors import (
    EXIT_OK,
    NodeUnavailable,
    UsageError,
)
from doctor.job.settings import HangSettings, StacksSettings
from doctor.pipeline.request import (
    AllreduceSettings,
    CheckSettings,
    ProbeSettings,
    Profile,
    Request,
    RunSettings,
    StageSettings,
    Targets,
)
from doctor.render.output import (
    Format,
    Formatting,
    OutputOptions,
    TopoOptions,
    Ui,
    emit,
    set_ui,
    stderr_console,
    stdout_console,
    ui,
)

if TYPE_CHECKING:
    from doctor.facts.node import NodeFacts
    from doctor.judge.report import Report
    from doctor.nodes.connect import Reached
    from doctor.plugin import CheckSpec

app = typer.Typer(
    name="doctor",
    help="Find what will break multi-node GPU training before you launch it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
checks_app = typer.Typer(help="List the checks.", no_args_is_help=True)
app.add_typer(checks_app, name="checks")
baseline_app = typer.Typer(help="Save a known-good node to judge drift by.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")
THIS_NODE = Targets(local=True)


def command(group: typer.Typer = app, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register a command, its request dataclasses expanded into their flags."""
    return lambda fn: group.command(name)(options(fn))


def _checks(
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    plugins: tuple[str, ...] = (),
) -> tuple[CheckSpec, ...]:
    """The registered checks, all or those selected (of ``plugins`` only, when named); a
    selection that matches none is misuse."""
    from doctor.judge.registry import load_checks, select

    try:
        return tuple(select(load_checks(plugins), include or (), exclude or ()))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run(request: Request, reached: Reached | None = None) -> Report:
    """The pipeline, with live progress on stderr (on nodes already ``reached``, if given)."""
    from doctor.pipeline import steps
    from doctor.render.progress import Progress

    settings = ui()
    progress = Progress(stderr_console(), quiet=settings.quiet, verbose=settings.verbose)
    if reached is None:
        return steps.run(request, progress)
    return steps.run_connected(request, *reached, progress)


def _reaching(targets: Targets) -> AbstractContextManager[Reached]:
    """The nodes and their transport, to enter before the checks load: the SSH handshakes then
    go on while the checks and their facts are imported (0.1 s), not after."""
    from doctor.nodes.connect import connect

    return connect(targets)


@command()
def preflight(
    output: OutputOptions,
    checks: CheckSettings,
    probe: ProbeSettings,
    targets: Targets,
    stages: StageSettings,
    allreduce: AllreduceSettings,
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
        return run_prolog(list(_checks(checks.include, checks.exclude)), output.threshold)
    with _reaching(targets) as reached:
        request = Request(
            "preflight",
            targets=targets,
            probe=probe,
            stages=stages,
            allreduce=allreduce if stages.allreduce else None,
            checks=_checks(checks.include, checks.exclude),
            baseline=checks.baseline,
            nics_section=True,
        )
        report = _run(request, reached)
    return emit(report, output)


@command(name="run")
def run_job(
    output: OutputOptions,
    checks: CheckSettings,
    probe: ProbeSettings,
    targets: Targets,
    stages: StageSettings,
    allreduce: AllreduceSettings,
    settings: RunSettings,
    hang: HangSettings,
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
        checks=_checks(checks.include, checks.exclude),
        baseline=checks.baseline,
        nics_section=True,
    )
    settings_ui = ui()
    from doctor.render.progress import Progress

    progress = Progress(stderr_console(), quiet=settings_ui.quiet, verbose=settings_ui.verbose)
    report, verdict, result = run_command(
        launch or [], line, request, settings, hang, output.threshold, progress
    )
    return show_job(report, verdict, result, output)


@command()
def stacks(output: OutputOptions, targets: Targets, settings: StacksSettings) -> int:
    """Where every rank of a running job is: the rank that holds the others, its node and line."""
    with _reaching(targets) as (nodes, transport):
        from doctor.job.stacks import look_at_job  # while the handshakes go on

        checks = _checks(["hang", "reach"], plugins=("hang", "cluster"))
        report = look_at_job(nodes, transport, settings, checks, targets.python)
    return emit(report, output)


@command()
def allreduce(output: OutputOptions, targets: Targets, settings: AllreduceSettings) -> int:
    """Run a real allreduce: phases, exact verification, a size sweep, the slow node."""
    with _reaching(targets) as reached:
        request = Request(
            "allreduce",
            targets=targets,
            allreduce=replace(settings, ranks=settings.ranks or 2),
            checks=_checks(["allreduce"]),
        )
        report = _run(request, reached)
    return emit(report, output)


@command()
def nics(
    output: OutputOptions,
    probe: ProbeSettings,
    export: Annotated[
        bool, typer.Option("--export", help="Print only shell lines to eval (export ...).")
    ] = False,
) -> int:
    """Which interface NCCL, Gloo and Open MPI will use on each node, and what to set."""
    from doctor.render.nics import print_exports, render_table

    specs = _checks(["nics", "rdma", "limits.memlock"])
    request = Request("nics", targets=THIS_NODE, probe=probe, checks=specs, nics_section=True)
    report = _run(request)
    plans = {name: facts.nic for name, facts in report.cluster.nodes.items()}
    if export:
        return print_exports(plans)
    if output.fmt is Format.text:
        render_table(plans, stdout_console())
    return emit(report, output)


def _here(command: str, probe: ProbeSettings, checks: tuple[CheckSpec, ...] = ()) -> NodeFacts:
    """This node's facts, probed now (``checks``: whose probe requests to honour; none judged)."""
    request = Request(command, targets=THIS_NODE, probe=probe, checks=checks, judge=False)
    report = _run(request)
    for failure in report.cluster.failures.values():
        raise NodeUnavailable(failure.summary)
    (facts,) = report.cluster.nodes.values()
    return facts


@command()
def probe(probe: ProbeSettings) -> int:
    """Print this node's raw capture (JSON): what every check is judged on."""
    raw = _here("probe", probe, _checks()).capture.raw
    sys.stdout.write(json.dumps(raw, indent=1, sort_keys=True) + "\n")
    return EXIT_OK


@command(baseline_app, "save")
def baseline_save(
    file: Annotated[Path, typer.Argument(help="Where to write the baseline (JSON).")],
    probe: ProbeSettings,
    source: Annotated[
        Path | None,
        typer.Option("--from", help="Use this saved capture (<node>.json) instead of probing."),
    ] = None,
) -> int:
    """Save this known-good node (or a saved capture of one) as the baseline for --baseline."""
    from doctor.pipeline.baseline import load_baseline, save_baseline

    try:
        facts = load_baseline(source) if source else _here("baseline", probe, _checks())
    except NodeUnavailable as exc:
        raise UsageError(f"cannot save a baseline: {exc}") from None
    save_baseline(file, facts.capture.raw)
    if not ui().quiet:
        stderr_console().print(f"saved baseline {file}; use it with --baseline {file}")
    return EXIT_OK


@command()
def collect(
    save_raw: Annotated[
        Path, typer.Option("--save-raw", help="Folder to write one <node>.json capture per node.")
    ],
    probe: ProbeSettings,
    targets: Targets,
) -> int:
    """Save raw captures (a support bundle); 'doctor analyze DIR' checks them later."""
    with _reaching(targets) as reached:
        from doctor.pipeline.saved import prepare, save_captures

        prepare(save_raw)
        request = Request("collect", targets=targets, probe=probe, checks=_checks(), judge=False)
        report = _run(request, reached)
    for path in save_captures(save_raw, report.cluster):
        if not ui().quiet:
            stderr_console().print(f"saved {path}", markup=False)
    return EXIT_OK if not report.cluster.failures else 1


@command()
def analyze(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Captures ('doctor collect --save-raw' folders or files) or pasted command "
            "output: FILE, DIR, NODE=FILE, or - for stdin. docs/paste.md lists what is read.",
            show_default=False,
        ),
    ],
    output: OutputOptions,
    checks: CheckSettings,
    node: Annotated[
        str | None, typer.Option("--node", help="The node that '-' (stdin) describes.")
    ] = None,
) -> int:
    """Run the checks on saved captures or pasted output, as if the nodes were probed now."""
    from doctor.paste import read_inputs, skipped

    captures = read_inputs(inputs, stdin_node=node)
    if not ui().quiet:
        for line in (note for cap in captures.values() for note in skipped(cap)):
            stderr_console().print(line, markup=False, highlight=False)
    request = Request(
        "analyze",
        captures=captures,
        checks=_checks(checks.include, checks.exclude),
        baseline=checks.baseline,
        nics_section=True,
    )
    return emit(_run(request), output)


@command()
def topo(probe: ProbeSettings, shown: TopoOptions) -> int:
    """GPU/NIC topology of this node: NVLink, PCIe distances, closest NIC per GPU."""
    from doctor.core.model import Missing
    from doctor.facts.topo.view import view_from_file, view_of
    from doctor.render.topo import show_topology

    if shown.input_file is not None:
        view = view_from_file(shown.input_file)
    else:
        facts = _here("topo", probe)
        if isinstance(facts.topo, Missing):
            raise NodeUnavailable(f"topology of {facts.node}: {facts.topo.reason}")
        view = view_of(facts.node, facts.topo)
    show_topology(view, shown.fmt, stdout_console())
    return EXIT_OK


@command()
def explain(
    formatting: Formatting,
    logs: Annotated[
        list[str] | None, typer.Argument(help="Log files (plain or gzip); '-' or none reads stdin.")
    ] = None,
) -> int:
    """Read failed-job logs (NCCL, PyTorch, Gloo, Open MPI, ssh) and name the cause and the fix."""
    from doctor.render.explain import show_explanation

    show_explanation(logs, formatting.fmt is Format.json, stdout_console())
    return EXIT_OK


@command(checks_app, "list")
def checks_list(formatting: Formatting) -> int:
    """Every check with its id, scope, what it needs and the codes it can emit."""
    from doctor.render.reference import check_list_json, check_list_text

    specs = _checks()
    text = check_list_json(specs) if formatting.fmt is Format.json else check_list_text(specs)
    sys.stdout.write(text)
    return EXIT_OK


@checks_app.command("reference")
def checks_reference() -> int:
    """Every check code with its meaning and fix, as Markdown (docs/checks.md is this output)."""
    from doctor.render.reference import render_reference

    sys.stdout.write(render_reference(_checks()))
    return EXIT_OK


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"cluster-doctor {__version__}\n")
        raise typer.Exit(0)


@app.callback()
@options
def _root(
    settings: Ui,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """Find what will break multi-node GPU training before you launch it."""
    set_ui(settings)
