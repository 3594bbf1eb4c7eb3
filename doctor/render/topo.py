"""A node's topology on the terminal: a matrix like `nvidia-smi topo -m`, legend, NIC affinity."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from doctor.core.errors import UsageError
from doctor.core.printable import printable
from doctor.facts.topo.matrix import gpu_fabric, legend
from doctor.facts.topo.smi_text import export_topo_text
from doctor.facts.topo.view import TopoView, nic_affinity, topo_json
from doctor.render.output import TopoFormat

STYLES = {
    "X": "dim",
    "PIX": "green",
    "PXB": "cyan",
    "PHB": "yellow",
    "NODE": "yellow",
    "SYS": "red",
}


def _width(header: list[str], rows: list[list[str]]) -> int:
    """The width a matrix needs to show every cell whole (one space each side of a column)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, [*row, *[""] * len(widths)], strict=False)]
    return sum(w + 2 for w in widths)


def _cell(label: str) -> Text:
    style = "bold green" if gpu_fabric(label) else STYLES.get(label, "")
    return Text(label, style=style)


def render_topology(view: TopoView, out: Console) -> None:
    topo = view.topology
    out.print(Text(f"{view.node}: topology from {view.source}", style="bold"))
    if not topo.gpus:
        out.print(f"no NVIDIA GPU on {view.node}")
    else:
        aliases = {n: f"NIC{i}" for i, n in enumerate(topo.nics)} if topo.nic_legend else {}
        names = [aliases.get(d, d) for d in topo.devices]
        header = ["", *names, *topo.columns]
        rows = [[names[i], *topo.cells[i], *topo.affinity[i]] for i in range(len(topo.devices))]
        table = Table(box=None, pad_edge=False, show_edge=False)
        for n, title in enumerate(header):
            centred = 0 < n <= len(names)
            table.add_column(title, justify="center" if centred else "left", no_wrap=True)
        for row in rows:
            padded = row + [""] * (len(header) - len(row))
            table.add_row(*(_cell(c) if 0 < n <= len(names) else c for n, c in enumerate(padded)))
        # A wide matrix stays a matrix: never squeezed to the terminal (nvidia-smi does not either).
        width = out.width
        out.width = max(width, _width(header, rows))
        try:
            out.print(table)
        finally:
            out.width = width
        out.print("\nLegend:")
        for label, meaning in legend(topo.cells):
            out.print(f"  {label:<4} = {meaning}", highlight=False)
        if aliases:
            out.print("\nNIC Legend:")
            for nic, alias in aliases.items():
                out.print(f"  {alias}: {nic}")
        affinity = nic_affinity(view)
        if affinity:
            out.print(
                "\nClosest NIC per GPU (GPUDirect RDMA at NCCL's default NCCL_NET_GDR_LEVEL):"
            )
            for gpu, near in affinity.items():
                gdr = "GDR on" if near["gdr"] else ("GDR off" if near["rdma"] else "no RDMA")
                out.print(f"  {gpu:<6} {','.join(near['nics']):<24} {near['label']:<5} {gdr}")
    if view.nic_lines:
        out.print("\nPCI NICs:")
        for line in view.nic_lines:
            out.print(f"  {line}", highlight=False)
    elif not topo.nics:
        out.print("\nno NIC found")
    if view.ports:
        out.print("\nRDMA ports (rate, width, error counters):")
        for port in view.ports:
            out.print(f"  {_port_line(port)}", highlight=False)
    if view.gpus:
        out.print("\nGPUs (temperature, margin to slowdown, power cap, firmware):")
        for vitals in view.gpus:
            out.print(f"  {_gpu_line(vitals)}", highlight=False)
    for note in view.notes:
        out.print(f"note: {note}", highlight=False)


def _port_line(row: dict[str, Any]) -> str:
    lanes = f" ({row['width']}X {row['speed'] or ''}".rstrip() + ")" if row["width"] else ""
    rate = f"{row['rate_gbps']:g} Gb/s{lanes}" if row["rate_gbps"] else "rate ?"
    counted = row["errors"]
    errors = "counters not read" if counted is None else "no errors counted"
    if counted:
        errors = ", ".join(f"{k} {v}" for k, v in counted.items())
    return (
        f"{row['port']:<14} {row['model'] or '?':<8} {row['state']:<7} {row['link_layer']:<10} "
        f"{rate:<22} fw {row['firmware'] or '?'}  {errors}"
    )


def _gpu_line(row: dict[str, Any]) -> str:
    def shown(value: Any, unit: str) -> str:
        return "?" if value is None else f"{value:g} {unit}"

    power = shown(row["power_limit"], "W")
    if row["power_default"] is not None:
        power += f" of {row['power_default']:g} W"
    return (
        f"{row['gpu']:<6} {row['name']:<24} {shown(row['temperature'], '°C'):>6}, "
        f"{shown(row['slowdown_margin'], '°C')} to slowdown, {power}, "
        f"VBIOS {row['vbios'] or '?'}, GSP {row['firmware'] or '?'}"
    )


def show_topology(view: TopoView, fmt: TopoFormat, out: Console) -> None:
    """`doctor topo` in the asked-for format."""
    if fmt is TopoFormat.json:
        sys.stdout.write(json.dumps(topo_json(view), indent=2) + "\n")
    elif fmt is TopoFormat.plain:
        if not view.topology.gpus:
            raise UsageError(f"--format plain: no NVIDIA GPU on {view.node}, no matrix to write")
        sys.stdout.write(printable(export_topo_text(view.topology)))  # names from a paste
    else:
        render_topology(view, out)
