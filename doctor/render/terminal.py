"""The terminal report: one line per check, then the findings with their fixes, worst first."""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from rich.console import Console
from rich.text import Text

from doctor.model import CheckOutcome, Finding, Severity, Status
from doctor.nodeset import compact, group_nodes
from doctor.render.allreduce import render_allreduce
from doctor.render.matrix import render_matrix
from doctor.report import Report

_STATUS_STYLE = {
    Status.PASS: ("ok", "green"),
    Status.WARN: ("warn", "yellow"),
    Status.FAIL: ("FAIL", "bold red"),
    Status.SKIP: ("skip", "dim"),
    Status.CRASH: ("CRASH", "bold magenta"),
}
_SEVERITY_STYLE = {Severity.FAIL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}
# The order in which a check's per-node statuses decide its one line.
_RANK = [Status.CRASH, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP]

# quiet: only what needs action (nothing at all on a clean run); verbose: every check on every
# node with its time, instead of one line per check.
Detail = Literal["quiet", "normal", "verbose"]


def _check_line(check: str, title: str, outcomes: list[CheckOutcome], many_nodes: bool) -> Text:
    by_status: dict[Status, list[CheckOutcome]] = defaultdict(list)
    for o in outcomes:
        by_status[o.status].append(o)
    status = next(s for s in _RANK if s in by_status)
    label, style = _STATUS_STYLE[status]
    line = Text("  ")
    line.append(f"{label:<5}", style=style)
    line.append(f" {check:<24} {title}")
    notes = []
    if status in (Status.SKIP, Status.CRASH):
        reasons = sorted({o.reason for o in by_status[status]})
        notes.append("; ".join(reasons))
    if many_nodes and status not in (Status.PASS, Status.SKIP):
        nodes = [o.node for o in by_status[status] if o.node]
        if nodes:
            notes.append(compact(nodes))
    if notes:
        line.append("  " + " — ".join(notes), style="dim")
    return line


def _finding_block(f: Finding) -> list[Text]:
    head = Text("  ")
    head.append(f"{str(f.severity).upper():<4}", style=_SEVERITY_STYLE[f.severity])
    head.append(f" {f.summary}")
    lines = [head]
    meta = Text("       ", style="dim")
    meta.append(f.code)
    if f.nodes:
        meta.append(f"  on {compact(f.nodes)}")
    lines.append(meta)
    lines.extend(Text(f"       seen: {e}", style="dim") for e in f.evidence)
    if f.fix:
        lines.append(Text(f"       fix: {f.fix.text}", style="green"))
        lines.extend(Text(f"         $ {c}", style="bold") for c in f.fix.commands)
    return lines


def _verbose_line(o: CheckOutcome) -> Text:
    label, style = _STATUS_STYLE[o.status]
    line = Text("  ")
    line.append(f"{label:<5}", style=style)
    line.append(f" {o.check:<24} {o.node or 'cluster'}  {o.seconds * 1000:.1f} ms")
    if o.reason:
        line.append(f"  {o.reason}", style="dim")
    return line


def render_text(report: Report, console: Console, detail: Detail = "normal") -> None:
    cluster = report.cluster
    names = cluster.names
    needs_action = report.findings or cluster.failures or report.summary()["crash"]
    if detail == "quiet" and not needs_action:
        return
    header = Text()
    header.append("cluster-doctor", style="bold")
    header.append(f" {report.command} · {len(names)} node{'s' if len(names) != 1 else ''}")
    header.append(f" ({compact(names)})", style="dim")
    if cluster.baseline is not None:
        header.append(f" · against baseline {cluster.baseline.node}")
    console.print(header)
    for name, failure in cluster.failures.items():
        console.print(Text(f"  ! {name}: {failure.summary}", style="bold red"))

    grouped: dict[str, list[CheckOutcome]] = defaultdict(list)
    for o in report.outcomes:
        grouped[o.check].append(o)
    if detail == "verbose":
        console.print(Text("\nChecks", style="bold underline"))
        for o in report.outcomes:
            console.print(_verbose_line(o))
    elif detail == "normal":
        console.print(Text("\nChecks", style="bold underline"))
        for check, outcomes in grouped.items():
            console.print(_check_line(check, outcomes[0].title, outcomes, len(names) > 1))

    if detail != "quiet":
        _stage_sections(report, console)

    if report.findings:
        console.print(Text("\nFindings", style="bold underline"))
        for f in report.findings:
            for line in _finding_block(f):
                console.print(line)
    s = report.summary()
    tail = Text("\n")
    tail.append(
        f"{s['fail']} fail, {s['warn']} warn, {s['pass']} pass, {s['skip']} skip"
        + (f", {s['crash']} crash" if s["crash"] else "")
        + (f"; {s['nodes_failed']} of {s['nodes']} nodes unreachable" if s["nodes_failed"] else ""),
        style="bold",
    )
    console.print(tail)


def _stage_sections(report: Report, console: Console) -> None:
    """The cross-node stages' tables: SSH mesh, TCP reachability, the allreduce runs."""
    sections = report.sections
    if "ssh_mesh" in sections:
        render_matrix("SSH mesh (rows: from, columns: to)", sections["ssh_mesh"], console)
    if "reachability" in sections:
        title = "TCP reachability, any interface (rows: from, columns: to)"
        render_matrix(title, sections["reachability"], console)
        proven = {
            n: ", ".join(i) or "nothing" for n, i in sections["reachability"]["proven"].items()
        }
        for ifaces, nodes in sorted(group_nodes(proven).items()):
            # What the interface recommendation may use: the rest is for the reach.* findings.
            console.print(f"  every peer reached {ifaces} on {compact(nodes)}", markup=False)
    allreduce = sections.get("allreduce")
    if allreduce and not allreduce["skipped"]:  # a skip is already its check's line
        render_allreduce(allreduce, console)
