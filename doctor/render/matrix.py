"""A node×node matrix in the terminal (the SSH mesh, reachability): rows are sources."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

# Status -> (one-character mark, style); the legend lists only marks that appear.
MARKS: dict[str, tuple[str, str]] = {
    "ok": (".", "green"),
    "publickey_denied": ("K", "bold red"),
    "host_key_unknown": ("H", "bold red"),
    "host_key_changed": ("C", "bold red"),
    "refused": ("R", "bold red"),
    "timeout": ("T", "bold red"),
    "unresolvable": ("N", "bold red"),
    "unreachable": ("U", "bold red"),
    "dropped": ("D", "bold red"),
    "no_ssh_client": ("S", "bold red"),
    "wrong_source": ("W", "bold red"),
    "wrong_host": ("M", "bold red"),
    "not_tested": ("?", "dim"),
    "failed": ("X", "bold red"),
}
NOT_RUN = ("?", "dim")
NOT_SAMPLED = (" ", "")
# Wider than this, a grid no longer fits a terminal: the counts and the failing pairs instead.
GRID_UP_TO = 32


def render_matrix(title: str, section: dict[str, Any], console: Console) -> None:
    """Print ``section`` (``nodes`` and ``matrix[source][target] = status``) as a grid, with
    what the stage covered when it sampled the pairs."""
    nodes: list[str] = section["nodes"]
    matrix: dict[str, dict[str, str]] = section["matrix"]
    coverage = section.get("coverage") or {}
    console.print(Text(f"\n{title}", style="bold underline"))
    if coverage.get("mode") == "sampled":
        console.print(
            f"  sampled: {coverage['pairs_tested']} of {coverage['pairs_total']} pairs "
            f"(seed {coverage['seed']}: --seed {coverage['seed']} tests them again)",
            markup=False,
        )
    if len(nodes) > GRID_UP_TO:
        _summary(matrix, console)
        return
    sampled = coverage.get("mode") == "sampled"
    width = max(len(n) for n in nodes)
    console.print(Text(" " * (width + 6) + " ".join(str(j + 1) for j in range(len(nodes)))))
    seen: set[str] = set()
    for i, source in enumerate(nodes):
        line = Text(f"  {i + 1:>2} {source:<{width}} ")
        row = matrix.get(source)
        for j, target in enumerate(nodes):
            line.append((" " if j else "") + " " * (len(str(j + 1)) - 1))  # under its number
            if source == target:
                line.append("-", style="dim")
                continue
            status = row.get(target) if row is not None else None
            if status:
                mark, style = MARKS.get(status, MARKS["failed"])
            elif sampled and row is not None:
                (mark, style), status = NOT_SAMPLED, "not sampled"
            else:
                (mark, style), status = NOT_RUN, "not run"
            seen.add(status)
            line.append(mark, style=style)
        console.print(line)
    legend = [f"{MARKS[s][0]} {s}" for s in MARKS if s in seen and s != "ok"]
    if "not run" in seen:
        legend.append("? not run")
    if "not sampled" in seen:
        legend.append("blank: not sampled")
    if legend:
        console.print(Text("     " + "  ".join(legend), style="dim"))


def _summary(matrix: dict[str, dict[str, str]], console: Console) -> None:
    """The pairs by status, and every pair that failed (the JSON and HTML reports hold all)."""
    counts: dict[str, int] = {}
    failed = []
    for source, row in matrix.items():
        for target, status in row.items():
            counts[status] = counts.get(status, 0) + 1
            if status != "ok":
                failed.append(f"{source} -> {target}: {status}")
    console.print(
        "  " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())), markup=False
    )
    for line in failed[:20]:
        console.print(Text(f"  {line}", style="bold red"))
    if len(failed) > 20:
        console.print(Text(f"  ... and {len(failed) - 20} more (see the JSON report)", style="dim"))
