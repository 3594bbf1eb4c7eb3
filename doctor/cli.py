"""The command line. Every command is a plain function returning the exit code."""

from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from doctor import __version__
from doctor.allreduce.command import attach, build_request
from doctor.allreduce.launch import Launcher as RankLauncher
from doctor.allreduce.launch import LocalLauncher
from doctor.allreduce.render import render_allreduce
from doctor.allreduce.srun import SrunLauncher
from doctor.allreduce.stage import Request, run_stage
from doctor.capture import Capture, CaptureError
from doctor.collect import gather, probe_spec, to_cluster
from doctor.errors import UsageError
from doctor.facts.cluster import NodeFailure
from doctor.inventory import local_node
from doctor.model import Severity
from doctor.nic.render import export_lines, nics_section, plans, render_table
from doctor.plugin import CheckSpec
from doctor.prolog import run_prolog
from doctor.registry import PluginError, load_checks, select
from doctor.render.json_report import render_json
from doctor.render.terminal import render_text
from doctor.report import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Report
from doctor.runner import run_checks
from doctor.transport.local import LocalTransport
from doctor.transport.srun import in_allocation
from doctor.transport.srun import slurm_nodes as slurm_nodes_of

app = typer.Typer(
    name="doctor",
    help="Find what will break multi-node GPU training before you launch it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
checks_app = typer.Typer(help="List the checks.", no_args_is_help=True)
app.add_typer(checks_app, name="checks")


class Launcher(str, enum.Enum):
    auto = "auto"
    local = "local"
    srun = "srun"


class Format(str, enum.Enum):
    text = "text"
    json = "json"


FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Report format on stdout.")]
JsonFileOpt = Annotated[
    Path | None, typer.Option("--json", help="Also write the JSON report to this file.")
]
FailOnOpt = Annotated[
    str, typer.Option("--fail-on", help="Exit 1 on findings at or above: warn or fail.")
]
SelectOpt = Annotated[
    list[str] | None, typer.Option("--select", help="Run only checks with this id or prefix.")
]
ExcludeOpt = Annotated[
    list[str] | None, typer.Option("--exclude", help="Skip checks with this id or prefix.")
]
TorchOpt = Annotated[
    bool,
    typer.Option(
        "--torch/--no-torch", help="Import torch on each node for its NCCL and CUDA (seconds)."
    ),
]
DeadlineOpt = Annotated[
    float, typer.Option("--deadline", min=1.0, help="Seconds the probe may take on a node.")
]
BackendOpt = Annotated[
    str, typer.Option("--backend", help="auto (NCCL where every node has a GPU), gloo or nccl.")
]
PortOpt = Annotated[int, typer.Option("--port", help="Rendezvous port on the first node.")]
PythonOpt = Annotated[
    str | None, typer.Option("--python", help="The nodes' Python interpreter that has torch.")
]
SizesOpt = Annotated[
    str, typer.Option("--sizes", help="Sweep sizes: LOW..HIGH (powers of two) or a,b,c.")
]
RecommendOpt = Annotated[
    list[str] | None,
    typer.Option("--recommend", help="NAME=VALUE to try as recommended (repeatable)."),
]
IfaceOpt = Annotated[
    str | None, typer.Option("--iface", help="Interface whose address hosts the rendezvous.")
]


def _stdout() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def _stderr() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def _severity(text: str) -> Severity:
    try:
        severity = Severity.parse(text)
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    if severity is Severity.INFO:
        raise UsageError("--fail-on: expected warn or fail")
    return severity


def _checks(include: list[str] | None, exclude: list[str] | None) -> list[CheckSpec]:
    try:
        return select(load_checks(), include or (), exclude or ())
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _emit(report: Report, fmt: Format, json_file: Path | None, fail_on: str) -> int:
    threshold = _severity(fail_on)
    if json_file is not None:
        try:
            json_file.write_text(render_json(report))
        except OSError as exc:
            raise UsageError(f"--json {json_file}: {exc.strerror}") from None
    if fmt is Format.json:
        sys.stdout.write(render_json(report))
    else:
        render_text(report, _stdout())
        allreduce = report.sections.get("allreduce")
        if allreduce and not allreduce["skipped"]:  # a skip is already its check's line
            render_allreduce(allreduce, _stdout())
    return report.exit_code(threshold)


@app.command()
def preflight(
    fmt: FormatOpt = Format.text,
    json_file: JsonFileOpt = None,
    fail_on: FailOnOpt = "fail",
    include: SelectOpt = None,
    exclude: ExcludeOpt = None,
    torch: TorchOpt = False,
    deadline: DeadlineOpt = 20.0,
    launcher: Annotated[
        Launcher,
        typer.Option(help="How to reach the nodes; auto uses srun inside a SLURM allocation."),
    ] = Launcher.auto,
    slurm_nodes: Annotated[
        str | None, typer.Option("--slurm-nodes", help="SLURM nodes to probe, e.g. gpu[01-16].")
    ] = None,
    partition: Annotated[
        str | None, typer.Option("--partition", help="Probe the nodes of this SLURM partition.")
    ] = None,
    local: Annotated[bool, typer.Option("--local", help="Check only this node.")] = False,
    prolog: Annotated[
        bool,
        typer.Option(
            "--prolog", help="With --local: a SLURM Prolog; exit 1 (drain) with one reason line."
        ),
    ] = False,
    run_allreduce: Annotated[
        bool, typer.Option("--allreduce/--no-allreduce", help="End with a real allreduce.")
    ] = True,
    backend: BackendOpt = "auto",
    port: PortOpt = 29500,
    python: PythonOpt = None,
) -> int:
    """Check this node (and, with hosts, every node) before launching training."""
    threshold = _severity(fail_on)
    specs = _checks(include, exclude)
    if prolog:
        if not local:
            raise UsageError("--prolog checks only this node: use it with --local")
        return run_prolog(specs, threshold)
    srun = launcher is Launcher.srun or slurm_nodes or partition
    if local and srun:
        raise UsageError("--local checks only this node: drop --launcher srun/--slurm-nodes")
    spec = probe_spec(specs, deadline=deadline, torch=torch)
    ranks: RankLauncher = LocalLauncher()
    if not local and (srun or (launcher is Launcher.auto and in_allocation(os.environ))):
        nodes, transport = slurm_nodes_of(slurm_nodes, partition, os.environ)
        results = gather(nodes, transport, spec)
        ranks = SrunLauncher()
    else:
        nodes = [local_node()]
        results = gather(nodes, LocalTransport(), spec)
    cluster = to_cluster(results)
    report = Report.build("preflight", cluster, run_checks(specs, cluster))
    report.sections["nics"] = nics_section(cluster)
    if run_allreduce:
        request = build_request(nodes, cluster, backend=backend, port=port, python=python)
        return _with_allreduce(report, request, fmt, json_file, fail_on, ranks)
    return _emit(report, fmt, json_file, fail_on)


def _with_allreduce(
    report: Report,
    request: Request,
    fmt: Format,
    json_file: Path | None,
    fail_on: str,
    launcher: RankLauncher | None = None,
) -> int:
    stage = run_stage(request, launcher or LocalLauncher())
    attach(report, stage)
    code = _emit(report, fmt, json_file, fail_on)
    return EXIT_INTERRUPTED if stage.interrupted else code


@app.command()
def allreduce(
    fmt: FormatOpt = Format.text,
    json_file: JsonFileOpt = None,
    fail_on: FailOnOpt = "fail",
    backend: BackendOpt = "auto",
    port: PortOpt = 29500,
    python: PythonOpt = None,
    ranks: Annotated[
        int, typer.Option("--ranks", min=1, help="Gloo ranks to start on this machine.")
    ] = 2,
    sizes: SizesOpt = "1K..64M",
    recommend: RecommendOpt = None,
    iface: IfaceOpt = None,
) -> int:
    """Run a real allreduce: phases, exact verification, a size sweep, the slow node."""
    _severity(fail_on)
    spec = probe_spec([], deadline=20.0)
    node = local_node()
    cluster = to_cluster(gather([node], LocalTransport(), spec))
    report = Report.build("allreduce", cluster, [])
    nodes = [node] * (ranks if backend != "nccl" else 1)
    request = build_request(
        nodes,
        cluster,
        backend=backend,
        port=port,
        python=python,
        sizes=sizes,
        recommend=recommend or [],
        iface=iface,
    )
    return _with_allreduce(report, request, fmt, json_file, fail_on)


@app.command()
def nics(
    fmt: FormatOpt = Format.text,
    export: Annotated[
        bool, typer.Option("--export", help="Print only shell lines to eval (export ...).")
    ] = False,
    fail_on: FailOnOpt = "fail",
    deadline: DeadlineOpt = 20.0,
) -> int:
    """Which interface NCCL, Gloo and Open MPI will use on each node, and what to set."""
    _severity(fail_on)
    specs = _checks(["nics", "rdma", "limits.memlock"], None)
    cluster = to_cluster(
        gather([local_node()], LocalTransport(), probe_spec(specs, deadline=deadline))
    )
    if export:
        lines = export_lines(plans(cluster))
        if not lines:
            _stderr().print("doctor: no interface with a routable address", markup=False)
            return 1
        sys.stdout.write("\n".join(lines) + "\n")
        return EXIT_OK
    report = Report.build("nics", cluster, run_checks(specs, cluster))
    report.sections["nics"] = nics_section(cluster)
    if fmt is Format.text:
        render_table(plans(cluster), _stdout())
    return _emit(report, fmt, None, fail_on)


@app.command()
def probe(torch: TorchOpt = False, deadline: DeadlineOpt = 20.0) -> int:
    """Print this node's raw capture (JSON): what every check is judged on."""
    spec = probe_spec(load_checks(), deadline=deadline, torch=torch)
    node = local_node()
    result = gather([node], LocalTransport(), spec)[node.name]
    if isinstance(result, NodeFailure):
        _stderr().print(f"doctor: {result.summary}")
        return EXIT_INTERNAL
    sys.stdout.write(json.dumps(result.raw, indent=1, sort_keys=True) + "\n")
    return EXIT_OK


@app.command()
def collect(
    save_raw: Annotated[
        Path, typer.Option("--save-raw", help="Folder to write one <node>.json capture per node.")
    ],
    torch: TorchOpt = False,
    deadline: DeadlineOpt = 20.0,
) -> int:
    """Save raw captures (a support bundle); 'doctor analyze DIR' checks them later."""
    try:
        save_raw.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--save-raw {save_raw}: {exc.strerror}") from None
    spec = probe_spec(load_checks(), deadline=deadline, torch=torch)
    failed = 0
    for name, result in gather([local_node()], LocalTransport(), spec).items():
        if isinstance(result, NodeFailure):
            _stderr().print(f"doctor: {name}: {result.summary}")
            failed += 1
            continue
        path = save_raw / f"{name}.json"
        path.write_text(json.dumps(result.raw, sort_keys=True))
        _stderr().print(f"saved {path}")
    return EXIT_OK if not failed else 1


def load_capture_dir(folder: Path) -> dict[str, Capture | NodeFailure]:
    """Read ``<node>.json`` captures from a folder; a corrupt or unreadable one is a usage error."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a readable folder of captures")
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError as exc:
        raise UsageError(f"{folder}: {exc.strerror}") from None
    if not paths:
        raise UsageError(f"{folder}: no <node>.json captures in it")
    results: dict[str, Capture | NodeFailure] = {}
    for path in paths:
        try:
            results[path.stem] = Capture(json.loads(path.read_bytes()))
        except OSError as exc:
            raise UsageError(f"{path}: {exc.strerror}") from None
        except (ValueError, CaptureError) as exc:
            raise UsageError(f"{path}: corrupt capture: {exc}") from None
    return results


@app.command()
def analyze(
    folder: Annotated[
        Path, typer.Argument(help="A folder written by 'doctor collect --save-raw'.")
    ],
    fmt: FormatOpt = Format.text,
    json_file: JsonFileOpt = None,
    fail_on: FailOnOpt = "fail",
    include: SelectOpt = None,
    exclude: ExcludeOpt = None,
) -> int:
    """Run the checks on saved captures, as if the nodes were probed now."""
    _severity(fail_on)
    specs = _checks(include, exclude)
    cluster = to_cluster(load_capture_dir(folder))
    report = Report.build("analyze", cluster, run_checks(specs, cluster))
    return _emit(report, fmt, json_file, fail_on)


@app.command()
def explain(
    logs: Annotated[
        list[str] | None, typer.Argument(help="Log files (plain or gzip); '-' or none reads stdin.")
    ] = None,
    fmt: FormatOpt = Format.text,
) -> int:
    """Read failed-job logs (NCCL, PyTorch, Gloo, Open MPI, ssh) and name the cause and the fix."""
    from doctor.explain.engine import explain as scan
    from doctor.explain.render import render_explain_json, render_explain_text
    from doctor.explain.source import LogReadError

    try:
        result = scan(logs or ["-"])
    except LogReadError as exc:
        raise UsageError(str(exc)) from None
    for problem in result.errors:
        _stderr().print(f"doctor: {problem} (kept what was read before it)", markup=False)
    if fmt is Format.json:
        sys.stdout.write(render_explain_json(result))
    else:
        render_explain_text(result, _stdout())
    return EXIT_OK


@checks_app.command("list")
def checks_list(fmt: FormatOpt = Format.text) -> int:
    """Every check with its id, scope, what it needs and the codes it can emit."""
    specs = load_checks()
    if fmt is Format.json:
        rows = [
            {
                "id": s.id,
                "title": s.title,
                "scope": s.scope,
                "needs": list(s.needs),
                "codes": s.codes,
            }
            for s in specs
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    out = _stdout()
    for s in specs:
        needs = f"  needs: {', '.join(s.needs)}" if s.needs else ""
        out.print(f"{s.id:<28} {s.scope:<7} {s.title}{needs}")
    return EXIT_OK


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"cluster-doctor {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    """Find what will break multi-node GPU training before you launch it."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: maps every way a run can end to the documented exit codes, one line each."""
    err = _stderr()
    try:
        rv = app(args=argv, prog_name="doctor", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
            return EXIT_OK
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"doctor: error: {message}", markup=False)
        return EXIT_USAGE
    except UsageError as exc:
        err.print(f"doctor: error: {exc}", markup=False)
        return EXIT_USAGE
    except (KeyboardInterrupt, typer.Abort):
        err.print("doctor: interrupted", markup=False)
        return EXIT_INTERRUPTED
    except PluginError as exc:
        err.print(f"doctor: {exc}", markup=False)
        return EXIT_INTERNAL
    except Exception as exc:
        if os.environ.get("DOCTOR_DEBUG"):
            traceback.print_exc()
        err.print(
            f"doctor: internal error: {type(exc).__name__}: {exc} "
            "(set DOCTOR_DEBUG=1 for the traceback, and please report it)",
            markup=False,
        )
        return EXIT_INTERNAL
    return rv if isinstance(rv, int) else EXIT_OK
