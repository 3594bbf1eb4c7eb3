"""The command line. Every command is a plain function returning the exit code."""

from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from doctor import __version__
from doctor.allreduce.command import attach, build_request
from doctor.allreduce.launch import launcher_for
from doctor.allreduce.stage import StageResult, run_stage
from doctor.baseline import load_baseline, save_baseline
from doctor.capture import Capture, CaptureError
from doctor.collect import gather, probe_spec, to_cluster
from doctor.config import default_map, find_config
from doctor.errors import UsageError
from doctor.facts.cluster import ClusterFacts
from doctor.inventory import Node, build_inventory, local_node
from doctor.model import NodeFailure
from doctor.nic.render import export_lines, nics_section, plans, render_table
from doctor.output import (
    BaselineOpt,
    FailOnOpt,
    Format,
    FormatOpt,
    JsonFileOpt,
    JunitFileOpt,
    MarkdownFileOpt,
    OutputOptions,
    RedactOpt,
    Ui,
    emit,
    parse_fail_on,
    set_ui,
    stderr_console,
    stdout_console,
    ui,
)
from doctor.plugin import CheckSpec
from doctor.progress import Progress
from doctor.prolog import run_prolog
from doctor.reference import render_reference
from doctor.registry import PluginError, load_checks, select
from doctor.report import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Report
from doctor.runner import run_checks
from doctor.stages.run import RemoteOptions, gather_cluster, stage_sections, transport_for
from doctor.topo.command import TopoFormat, run_topo
from doctor.transport import BatchTransport, SshOptions, Transport
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
baseline_app = typer.Typer(help="Save a known-good node to judge drift by.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


class Launcher(str, enum.Enum):
    auto = "auto"
    local = "local"
    srun = "srun"


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

# -- which nodes, and how to reach them ------------------------------------------------------
HostsOpt = Annotated[
    str | None,
    typer.Option("--hosts", "-H", help="Nodes: host[:slots][,host...] (user@host:port:slots too)."),
]
HostfileOpt = Annotated[
    Path | None,
    typer.Option("--hostfile", help="MPI/DeepSpeed (host slots=N) or Horovod (host:N) hostfile."),
]
SlurmOpt = Annotated[
    bool, typer.Option("--slurm", help="The nodes of this SLURM allocation (SLURM_JOB_NODELIST).")
]
SshConfigOpt = Annotated[
    Path | None,
    typer.Option("--ssh-config", help="ssh_config for aliases (default ~/.ssh/config)."),
]
SshPortOpt = Annotated[
    int | None, typer.Option("--ssh-port", min=1, max=65535, help="SSH port where none is given.")
]
IdentityOpt = Annotated[
    list[str] | None,
    typer.Option("--identity", "-i", help="Private key file for SSH (repeatable)."),
]
KnownHostsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--known-hosts", help="known_hosts file (default ~/.ssh/known_hosts; repeatable)."
    ),
]
AcceptNewOpt = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-keys",
        help="Trust and record unknown host keys (OpenSSH accept-new); changed keys stay refused.",
    ),
]
ConnectTimeoutOpt = Annotated[
    float, typer.Option("--connect-timeout", min=0.5, help="Seconds to connect to a node.")
]
NodePythonOpt = Annotated[
    str | None,
    typer.Option("--python", help="Python on the nodes (default: the first python3 found there)."),
]
MeshOpt = Annotated[
    bool, typer.Option("--mesh/--no-mesh", help="Test SSH from every node to every other node.")
]
ReachOpt = Annotated[
    bool,
    typer.Option("--reach/--no-reach", help="Test TCP between nodes on each candidate interface."),
]
MasterAddrOpt = Annotated[
    str | None,
    typer.Option(
        "--master-addr", help="Rendezvous name every node must resolve (default: node 1)."
    ),
]


def _remote(
    hosts: str | None,
    hostfile: Path | None,
    slurm: bool,
    ssh_config: Path | None,
    ssh_port: int | None,
    identity: list[str] | None,
    known_hosts: list[str] | None,
    accept_new: bool,
    connect_timeout: float,
    python: str | None,
    mesh: bool = True,
    master: str | None = None,
    reach: bool = True,
) -> tuple[list[Node], RemoteOptions]:
    nodes = build_inventory(
        hosts=hosts, hostfile=hostfile, slurm=slurm, ssh_config=ssh_config, ssh_port=ssh_port
    )
    ssh = SshOptions(
        connect_timeout=connect_timeout,
        accept_new_host_keys=accept_new,
        known_hosts=tuple(known_hosts or ()),
        identity_files=tuple(identity or ()),
    )
    options = RemoteOptions(ssh=ssh, python=python, mesh=mesh, reach=reach, master_addr=master)
    return nodes, options


def _checks(include: list[str] | None, exclude: list[str] | None) -> list[CheckSpec]:
    try:
        return select(load_checks(), include or (), exclude or ())
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _gather(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    spec: dict[str, Any],
    options: RemoteOptions,
) -> ClusterFacts:
    """Probe the nodes and run the cross-node stages, with live per-node progress on stderr."""
    settings = ui()
    progress = Progress(
        stderr_console(), [n.name for n in nodes], quiet=settings.quiet, verbose=settings.verbose
    )
    with progress:
        return gather_cluster(nodes, transport, spec, options, on_done=progress.done)


def _judge(
    command: str, cluster: ClusterFacts, specs: list[CheckSpec], baseline: Path | None
) -> Report:
    if baseline is not None:
        cluster.baseline = load_baseline(baseline)
    report = Report.build(command, cluster, run_checks(specs, cluster))
    report.sections.update(stage_sections(cluster))
    report.sections["nics"] = nics_section(cluster)
    return report


@app.command()
def preflight(
    fmt: FormatOpt = Format.text,
    json_file: JsonFileOpt = None,
    junit_file: JunitFileOpt = None,
    markdown_file: MarkdownFileOpt = None,
    redact: RedactOpt = False,
    fail_on: FailOnOpt = "fail",
    include: SelectOpt = None,
    exclude: ExcludeOpt = None,
    baseline: BaselineOpt = None,
    torch: TorchOpt = False,
    deadline: DeadlineOpt = 20.0,
    hosts: HostsOpt = None,
    hostfile: HostfileOpt = None,
    slurm: SlurmOpt = False,
    ssh_config: SshConfigOpt = None,
    ssh_port: SshPortOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    accept_new: AcceptNewOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    python: NodePythonOpt = None,
    mesh: MeshOpt = True,
    reach: ReachOpt = True,
    master: MasterAddrOpt = None,
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
) -> int:
    """Check this node (and, with hosts, every node) before launching training."""
    opts = OutputOptions(fmt, json_file, junit_file, markdown_file, redact, fail_on)
    threshold = parse_fail_on(fail_on)
    specs = _checks(include, exclude)
    if prolog:
        if not local:
            raise UsageError("--prolog checks only this node: use it with --local")
        return run_prolog(specs, threshold)
    srun = launcher is Launcher.srun or slurm_nodes or partition
    if local and srun:
        raise UsageError("--local checks only this node: drop --launcher srun/--slurm-nodes")
    spec = probe_spec(specs, deadline=deadline, torch=torch)
    remote_given = bool(hosts or hostfile or slurm)
    if local and remote_given:
        raise UsageError("--local checks only this node: drop -H/--hostfile/--slurm")
    if (
        not local
        and not remote_given
        and (srun or (launcher is Launcher.auto and in_allocation(os.environ)))
    ):
        # The scheduler is the transport: one srun step reaches every node of the allocation.
        nodes, batch = slurm_nodes_of(slurm_nodes, partition, os.environ)
        options = RemoteOptions(python=python, mesh=False, reach=False)
        reach_nodes: AbstractContextManager[Transport | BatchTransport] = nullcontext(batch)
    else:
        nodes, options = _remote(
            hosts, hostfile, slurm, ssh_config, ssh_port, identity, known_hosts, accept_new,
            connect_timeout, python, mesh, master, reach,
        )  # fmt: skip
        reach_nodes = transport_for(nodes, options.ssh)
    stage = None
    with reach_nodes as transport:
        cluster = _gather(nodes, transport, spec, options)
        if run_allreduce:  # last, over the same connections
            request = build_request(nodes, cluster, backend=backend, port=port, python=python)
            stage = run_stage(request, launcher_for(transport))
    return _with_allreduce(_judge("preflight", cluster, specs, baseline), stage, opts)


def _with_allreduce(report: Report, stage: StageResult | None, opts: OutputOptions) -> int:
    if stage is None:
        return emit(report, opts)
    attach(report, stage)
    code = emit(report, opts)
    return EXIT_INTERRUPTED if stage.interrupted else code


@app.command()
def allreduce(
    fmt: FormatOpt = Format.text,
    json_file: JsonFileOpt = None,
    fail_on: FailOnOpt = "fail",
    hosts: HostsOpt = None,
    hostfile: HostfileOpt = None,
    slurm: SlurmOpt = False,
    ssh_config: SshConfigOpt = None,
    ssh_port: SshPortOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    accept_new: AcceptNewOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    python: NodePythonOpt = None,
    backend: BackendOpt = "auto",
    port: PortOpt = 29500,
    ranks: Annotated[
        int, typer.Option("--ranks", min=1, help="Without hosts: Gloo ranks on this machine.")
    ] = 2,
    sizes: SizesOpt = "1K..64M",
    recommend: RecommendOpt = None,
    iface: IfaceOpt = None,
) -> int:
    """Run a real allreduce: phases, exact verification, a size sweep, the slow node."""
    parse_fail_on(fail_on)
    nodes, options = _remote(
        hosts, hostfile, slurm, ssh_config, ssh_port, identity, known_hosts, accept_new,
        connect_timeout, python, mesh=False, reach=False,
    )  # fmt: skip
    spec = probe_spec([], deadline=20.0)
    with transport_for(nodes, options.ssh) as transport:
        cluster = _gather(nodes, transport, spec, options)
        if all(n.local for n in nodes) and backend != "nccl":
            nodes = nodes * ranks  # several Gloo ranks on this machine, over loopback
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
        stage = run_stage(request, launcher_for(transport))
    report = Report.build("allreduce", cluster, [])
    opts = OutputOptions(fmt=fmt, json_file=json_file, fail_on=fail_on)
    return _with_allreduce(report, stage, opts)


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
    parse_fail_on(fail_on)
    specs = _checks(["nics", "rdma", "limits.memlock"], None)
    cluster = _gather(
        [local_node()], LocalTransport(), probe_spec(specs, deadline=deadline), RemoteOptions()
    )
    if export:
        lines = export_lines(plans(cluster))
        if not lines:
            stderr_console().print("doctor: no interface with a routable address", markup=False)
            return 1
        sys.stdout.write("\n".join(lines) + "\n")
        return EXIT_OK
    report = _judge("nics", cluster, specs, None)
    if fmt is Format.text:
        render_table(plans(cluster), stdout_console())
    return emit(report, OutputOptions(fmt=fmt, fail_on=fail_on))


@app.command()
def probe(torch: TorchOpt = False, deadline: DeadlineOpt = 20.0) -> int:
    """Print this node's raw capture (JSON): what every check is judged on."""
    spec = probe_spec(load_checks(), deadline=deadline, torch=torch)
    node = local_node()
    result = gather([node], LocalTransport(), spec)[node.name]
    if isinstance(result, NodeFailure):
        stderr_console().print(f"doctor: {result.summary}")
        return EXIT_INTERNAL
    sys.stdout.write(json.dumps(result.raw, indent=1, sort_keys=True) + "\n")
    return EXIT_OK


@baseline_app.command("save")
def baseline_save(
    file: Annotated[Path, typer.Argument(help="Where to write the baseline (JSON).")],
    source: Annotated[
        Path | None,
        typer.Option("--from", help="Use this saved capture (<node>.json) instead of probing."),
    ] = None,
    torch: TorchOpt = False,
    deadline: DeadlineOpt = 20.0,
) -> int:
    """Save this known-good node (or a saved capture of one) as the baseline for --baseline."""
    if source is not None:
        raw = load_baseline(source).capture.raw
    else:
        node = local_node()
        spec = probe_spec(load_checks(), deadline=deadline, torch=torch)
        cluster = _gather([node], LocalTransport(), spec, RemoteOptions())
        if node.name in cluster.failures:
            raise UsageError(f"cannot save a baseline: {cluster.failures[node.name].summary}")
        raw = cluster.nodes[node.name].capture.raw
    save_baseline(file, raw)
    if not ui().quiet:
        stderr_console().print(f"saved baseline {file}; use it with --baseline {file}")
    return EXIT_OK


@app.command()
def collect(
    save_raw: Annotated[
        Path, typer.Option("--save-raw", help="Folder to write one <node>.json capture per node.")
    ],
    torch: TorchOpt = False,
    deadline: DeadlineOpt = 20.0,
    hosts: HostsOpt = None,
    hostfile: HostfileOpt = None,
    slurm: SlurmOpt = False,
    ssh_config: SshConfigOpt = None,
    ssh_port: SshPortOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    accept_new: AcceptNewOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    python: NodePythonOpt = None,
) -> int:
    """Save raw captures (a support bundle); 'doctor analyze DIR' checks them later."""
    nodes, options = _remote(
        hosts, hostfile, slurm, ssh_config, ssh_port, identity, known_hosts, accept_new,
        connect_timeout, python, mesh=False, reach=False,
    )  # fmt: skip
    try:
        save_raw.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--save-raw {save_raw}: {exc.strerror}") from None
    spec = probe_spec(load_checks(), deadline=deadline, torch=torch)
    failed = 0
    with transport_for(nodes, options.ssh) as transport:
        cluster = _gather(nodes, transport, spec, options)
    for name in cluster.names:
        if name in cluster.failures:
            failed += 1
            continue
        path = save_raw / f"{name}.json"
        path.write_text(json.dumps(cluster.nodes[name].capture.raw, sort_keys=True))
        if not ui().quiet:
            stderr_console().print(f"saved {path}")
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
    junit_file: JunitFileOpt = None,
    markdown_file: MarkdownFileOpt = None,
    redact: RedactOpt = False,
    fail_on: FailOnOpt = "fail",
    include: SelectOpt = None,
    exclude: ExcludeOpt = None,
    baseline: BaselineOpt = None,
) -> int:
    """Run the checks on saved captures, as if the nodes were probed now."""
    opts = OutputOptions(fmt, json_file, junit_file, markdown_file, redact, fail_on)
    parse_fail_on(fail_on)
    specs = _checks(include, exclude)
    cluster = to_cluster(load_capture_dir(folder))
    return emit(_judge("analyze", cluster, specs, baseline), opts)


@app.command()
def topo(
    input_file: Annotated[
        Path | None,
        typer.Option(
            "--input",
            "-i",
            help="Read a saved 'nvidia-smi topo -m' output (or a 'doctor collect' capture).",
        ),
    ] = None,
    fmt: Annotated[
        TopoFormat, typer.Option("--format", "-f", help="text, json, or plain (nvidia-smi layout).")
    ] = TopoFormat.text,
    deadline: DeadlineOpt = 20.0,
) -> int:
    """GPU/NIC topology of this node: NVLink, PCIe distances, closest NIC per GPU."""
    return run_topo(input_file, fmt, deadline, stdout_console())


@app.command()
def explain(
    logs: Annotated[
        list[str] | None, typer.Argument(help="Log files (plain or gzip); '-' or none reads stdin.")
    ] = None,
    fmt: FormatOpt = Format.text,
) -> int:
    """Read failed-job logs (NCCL, PyTorch, Gloo, Open MPI, ssh) and name the cause and the fix."""
    from doctor.explain.scan import explain as scan
    from doctor.explain.source import LogReadError
    from doctor.render.explain import render_explain_json, render_explain_text

    if not logs and sys.stdin.isatty():
        raise UsageError("explain: name log files, or pipe a log into 'doctor explain -'")
    try:
        result = scan(logs or ["-"])
    except LogReadError as exc:
        raise UsageError(str(exc)) from None
    for problem in result.errors:
        stderr_console().print(f"doctor: {problem} (kept what was read before it)", markup=False)
    if fmt is Format.json:
        sys.stdout.write(render_explain_json(result))
    else:
        render_explain_text(result, stdout_console())
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
    out = stdout_console()
    for s in specs:
        needs = f"  needs: {', '.join(s.needs)}" if s.needs else ""
        out.print(f"{s.id:<28} {s.scope:<7} {s.title}{needs}")
    return EXIT_OK


@checks_app.command("reference")
def checks_reference() -> int:
    """Every check code with its meaning and fix, as Markdown (docs/checks.md is this output)."""
    sys.stdout.write(render_reference(load_checks()))
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
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only what needs action; no progress."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Every check on every node, and every node's probe."),
    ] = False,
) -> None:
    """Find what will break multi-node GPU training before you launch it."""
    if quiet and verbose:
        raise UsageError("--quiet and --verbose exclude each other")
    set_ui(Ui(quiet=quiet, verbose=verbose))


def _config_defaults() -> dict | None:
    """click's default_map from doctor.toml / pyproject.toml in the working directory."""
    found = find_config(Path.cwd())
    if found is None:
        return None
    path, table = found
    return default_map(typer.main.get_command(app), table, path)


def main(argv: list[str] | None = None) -> int:
    """Entry point: maps every way a run can end to the documented exit codes, one line each."""
    err = stderr_console()
    try:
        rv = app(
            args=argv, prog_name="doctor", standalone_mode=False, default_map=_config_defaults()
        )
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
