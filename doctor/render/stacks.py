"""The stacks section in the terminal: one line per place the ranks are, the most first."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from doctor.core.nodeset import compact


def _ranks(ranks: list[dict[str, Any]]) -> str:
    numbers = [str(r["rank"]) for r in ranks if r["rank"] is not None]
    shown = compact(numbers).strip("[]") if numbers else "?"
    nodes = compact(sorted({r["node"] for r in ranks}))
    return f"rank{'s' if len(numbers) != 1 else ''} {shown} on {nodes}"


def render_stacks(section: dict[str, Any], console: Console) -> None:
    for job in section["jobs"]:
        ranks = job["ranks"]
        world = f", world size {job['world_size']}" if job["world_size"] else ""
        named = f"{job['job']}: " if len(section["jobs"]) > 1 else ""
        title = f"\nStacks ({named}{len(ranks)} rank{'s' if len(ranks) != 1 else ''}{world})"
        console.print(Text(title, style="bold underline"))
        for group in job["groups"]:
            line = Text(f"  {group['count']:>4}  ")
            line.append(group["position"], style="" if group["waits"] else "bold")
            line.append(f"  {_ranks(group['ranks'])}", style="dim")
            if len(group["ranks"]) == 1:
                line.append(f", pid {group['ranks'][0]['pid']}", style="dim")
            console.print(line)
        for rank in ranks:
            if rank["stack_error"]:
                console.print(
                    Text(f"     -  rank {rank['rank']} on {rank['node']}: {rank['stack_error']}"),
                    style="yellow",
                )
            for child in rank["children"]:
                frame = child["frames"][0] if child["frames"] else "no Python frame"
                console.print(
                    f"        rank {rank['rank']}'s worker pid {child['pid']}: {frame}"
                    + (f" (waits in {child['wchan']})" if child["wchan"] else ""),
                    markup=False,
                    style="dim",
                )
    for node, why in section["silent"].items():
        console.print(Text(f"     ?  {node}: no answer ({why})", style="bold red"))
