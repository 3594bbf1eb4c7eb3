"""The terminal report: the findings with their fixes (worst first), one line per check that ran,
one line for the checks that were skipped, the cross-node tables, and the summary line last."""

from __future__ import annotations

from typing import Literal

from rich.console import Console
from rich.text import Text

from doctor.core.model import CheckOutcome, Finding, Severity, Status
from doctor.core.nodeset import compact, group_nodes
from doctor.judge.report import Report
from doctor.render.allreduce import render_allreduce
from doctor.render.checklist import CheckRow, SkipGroup, fold_checks
from doctor.render.matrix import render_matrix
from doctor.render.stacks import render_stacks

_STATUS_STYLE = {
    Status.PASS: ("ok", "green"),
    Status.WARN: ("warn", "yellow"),
    Status.FAIL: ("FAIL", "bold red"),
    Status.SKIP: ("skip", "dim"),
    Status.CRASH: ("CRASH", "bold magenta"),
}
_SEVERITY_STYLE = {Severity.FAIL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}

# quiet: only what needs action (nothing at all on a clean run); verbose: every check on every
# node with its time, instead of one line per check.
Detail = Literal["quiet", "normal", "verbose"]


def _check_line(row: CheckRow, many_nodes: bool) -> Text:
    label, style = _STATUS_STYLE[row.status]
    line = Text("  ")
    line.append(f"{label:<5}", style=style)
    line.append(f" {row.check:<24} {row.title}")
    notes = []
    if row.reasons:
        notes.append("; ".join(row.reasons))
    if many_nodes and row.status is not Status.PASS and row.nodes:
        notes.append(compact(row.nodes))
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


def _skip_line(groups: list[SkipGroup]) -> Text:
    """Every skipped check on one line, however many reasons: ``25 checks skipped for 11
    reasons (commonest: no NVIDIA GPU on this node, 7)``; one reason is given whole, and one
    check with its id. --verbose lists every skipped check on every node."""
    label, style = _STATUS_STYLE[Status.SKIP]
    line = Text("  ")
    line.append(f"{label:<5}", style=style)
    total = sum(len(g.checks) for g in groups)
    if total == 1:
        line.append(f" {groups[0].checks[0][0]:<24} {groups[0].reason}")
        return line
    if len(groups) == 1:
        line.append(f" {total} checks skipped: {groups[0].reason}")
    else:
        top = groups[0]  # fold_checks puts the commonest reason first
        line.append(
            f" {total} checks skipped for {len(groups)} reasons "
            f"(commonest: {top.reason}, {len(top.checks)})"
        )
    line.append("  (--verbose lists them)", style="dim")
    return line


def _check_lines(report: Report, detail: Detail) -> list[Text]:
    """Normal: one line per check that ran, worst first, then the skipped ones folded by
    reason; verbose: every check on every node with its time."""
    if detail == "verbose":
        return [_verbose_line(o) for o in report.outcomes]
    rows, skipped = fold_checks(report.outcomes)
    many_nodes = len(report.cluster.names) > 1
    return [_check_line(r, many_nodes) for r in rows] + ([_skip_line(skipped)] if skipped else [])


def render_text(report: Report, console: Console, detail: Detail = "normal") -> None:
    """Print the report: findings first (what to do), then checks and tables, the summary last."""
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

    if report.findings:
        console.print(Text("\nFindings", style="bold underline"))
        for f in report.findings:
            for line in _finding_block(f):
                console.print(line)
    if detail != "quiet":
        console.print(Text("\nChecks", style="bold underline"))
        for line in _check_lines(report, detail):
            console.print(line)
        _stage_sections(report, console)

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
    """The cross-node stages' tables: where a job's ranks are, SSH mesh, TCP reachability, the
    allreduce runs."""
    sections = report.sections
    if "stacks" in sections:
        render_stacks(sections["stacks"], console)
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
    if "nccl" in sections:
        console.print(Text("\nWhat NCCL said it used", style="bold underline"))
        for row in sections["nccl"]:
            console.print(f"  {row['node']} ({row['source']}): {row['used']}", markup=False)
            console.print(f"    predicted: {row['predicted']}", style="dim", markup=False)
