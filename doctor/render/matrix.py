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


def render_matrix(title: str, section: dict[str, Any], console: Console) -> None:
    """Print ``section`` (``nodes`` and ``matrix[source][target] = status``) as a grid."""
    nodes: list[str] = section["nodes"]
    matrix: dict[str, dict[str, str]] = section["matrix"]
    width = max(len(n) for n in nodes)
    console.print(Text(f"\n{title}", style="bold underline"))
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
            mark, style = MARKS.get(status, MARKS["failed"]) if status else NOT_RUN
            seen.add(status or "not run")
            line.append(mark, style=style)
        console.print(line)
    legend = [f"{MARKS[s][0]} {s}" for s in MARKS if s in seen and s != "ok"]
    if "not run" in seen:
        legend.append("? not run")
    if legend:
        console.print(Text("     " + "  ".join(legend), style="dim"))
