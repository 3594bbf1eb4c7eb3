"""The allreduce section in the terminal: the runs side by side, then the sweep."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from doctor.core.units import human_bytes

_STYLE = {"passed": "green", "failed": "bold red", "timeout": "bold red", "interrupted": "yellow"}


def _rank_cell(rank: dict[str, Any]) -> Text:
    if rank["completed"]:
        return Text("done", style="green")
    text = Text(rank["phase"], style="bold red")
    if rank["error"]:
        text.append(f": {rank['error'][:120]}", style="dim")
    return text


def render_allreduce(section: dict[str, Any], console: Console) -> None:
    runs = section["runs"]
    console.print(
        Text(
            f"\nAllreduce ({section['backend']}, {section['world_size']} ranks, "
            f"rendezvous {section['rendezvous']})",
            style="bold underline",
        )
    )
    if not runs:
        console.print(Text("  not started", style="bold red"))
        return
    table = Table(box=None, show_header=True, pad_edge=False, header_style="bold")
    table.add_column("")
    for run in runs:
        env = " ".join(f"{k}={v}" for k, v in sorted(run["env"].items()))
        table.add_column(run["label"] + (f" ({env})" if env else ""))
    table.add_row("status", *(Text(r["status"], style=_STYLE.get(r["status"], "")) for r in runs))
    table.add_row("verified", *("exactly" if r["verified"] else "no" for r in runs))
    table.add_row("seconds", *(f"{r['seconds']:.1f}" for r in runs))
    for i, rank in enumerate(runs[0]["ranks"]):
        table.add_row(
            f"rank {rank['rank']} {rank['node']}", *(_rank_cell(r["ranks"][i]) for r in runs)
        )
    console.print(table)
    for run in runs:
        if not run["sweep"]:
            continue
        sweep = Table(
            box=None, header_style="bold", title=f"sweep, {run['label']}", title_justify="left"
        )
        for name in ("size", "time", "algbw GB/s", "busbw GB/s", "slowest"):
            sweep.add_column(name, justify="right" if name != "slowest" else "left")
        for row in run["sweep"]:
            sweep.add_row(
                human_bytes(row["bytes"]),
                f"{row['time_s'] * 1e6:.0f} us",
                f"{row['algbw_gbps']:.4f}",
                f"{row['busbw_gbps']:.4f}",
                f"rank {row['slowest_rank']} ({row['slowest_node']})",
            )
        console.print(sweep)
        stopped = run.get("sweep_stopped")
        if stopped:
            why = {"plateau": "the bandwidth stopped growing", "budget": "its time was spent"}
            console.print(
                Text(
                    f"  sized by time: stopped after {human_bytes(stopped['after_bytes'])}, "
                    f"{why.get(stopped.get('reason', 'budget'), stopped.get('reason'))}",
                    style="dim",
                )
            )
        if run["slow_node"]:
            console.print(Text(f"  slow node: {run['slow_node']}", style="yellow"))
