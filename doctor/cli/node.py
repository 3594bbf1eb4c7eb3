"""This node's hardware: `doctor nics` (which interface NCCL, Gloo and Open MPI will use, and
what to set) and `doctor topo` (the GPU/NIC topology), with the topology's own options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from doctor.cli.common import THIS_NODE, here, run, select_checks
from doctor.core.errors import EXIT_OK, NodeUnavailable
from doctor.core.flag import flag
from doctor.pipeline.request import ProbeSettings, Request
from doctor.render.output import Format, OutputOptions, TopoFormat, emit, stdout_console


@dataclass(frozen=True)
class TopoOptions:
    input_file: Annotated[
        Path | None,
        flag(
            "--input",
            "-i",
            help="Read a saved 'nvidia-smi topo -m' output (or a 'doctor collect' capture).",
        ),
    ] = None
    fmt: Annotated[
        TopoFormat, flag("--format", "-f", help="text, json, or plain (nvidia-smi layout).")
    ] = TopoFormat.text


def nics(
    output: OutputOptions,
    probe: ProbeSettings,
    export: Annotated[
        bool, typer.Option("--export", help="Print only shell lines to eval (export ...).")
    ] = False,
) -> int:
    """Which interface NCCL, Gloo and Open MPI will use on each node, and what to set."""
    from doctor.render.nics import print_exports, render_table

    specs = select_checks(["nics", "rdma", "limits.memlock"])
    request = Request("nics", targets=THIS_NODE, probe=probe, checks=specs, nics_section=True)
    report = run(request)
    plans = {name: facts.nic for name, facts in report.cluster.nodes.items()}
    if export:
        return print_exports(plans)
    if output.fmt is Format.text:
        render_table(plans, stdout_console())
    return emit(report, output)


def topo(probe: ProbeSettings, shown: TopoOptions) -> int:
    """GPU/NIC topology of this node: NVLink, PCIe distances, closest NIC per GPU."""
    from doctor.core.model import Missing
    from doctor.facts.topo.view import view_from_file, view_of
    from doctor.render.topo import show_topology

    if shown.input_file is not None:
        view = view_from_file(shown.input_file)
    else:
        facts = here("topo", probe)
        if isinstance(facts.topo, Missing):
            raise NodeUnavailable(f"topology of {facts.node}: {facts.topo.reason}")
        view = view_of(facts.node, facts.topo, facts.rdma, facts.gpus)
    show_topology(view, shown.fmt, stdout_console())
    return EXIT_OK
