"""The terminal report: the findings with their fixes (worst first), one line per check that ran,
one line per reason checks were skipped for, the cross-node tables, and the summary line last."""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from rich.console import Console
from rich.text import Text

from doctor.allreduce.render import render_allreduce
from doctor.model import CheckOutcome, Finding, Severity, Status
from doctor.nodeset import compact
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
    if status is Status.CRASH:  # a check skipped everywhere is folded by _skip_lines
        reasons = sorted({o.reason for o in by_status[status]})
        notes.append("; ".join(reasons))
    if many_nodes and status is not Status.PASS:
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


def _skip_lines(skipped: dict[str, list[CheckOutcome]]) -> list[Text]:
    """Skipped checks folded by reason: ``16 checks skipped: no NVIDIA GPU on this node``.

    A reason only one check gave is shown with that check's id; --verbose lists every skipped
    check on every node. Commonest reason first.
    """
    by_reason: dict[str, list[str]] = defaultdict(list)
    for check, outcomes in skipped.items():
        by_reason["; ".join(sorted({o.reason for o in outcomes}))].append(check)
    lines = []
    for reason, checks in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        line = Text("  ")
        line.append(f"{_STATUS_STYLE[Status.SKIP][0]:<5}", style=_STATUS_STYLE[Status.SKIP][1])
        if len(checks) > 1:
            line.append(f" {len(checks)} checks skipped: {reason}")
            line.append("  (--verbose lists them)", style="dim")
        else:
            line.append(f" {checks[0]:<24} {reason}")
        lines.append(line)
    return lines


def _check_lines(report: Report, detail: Detail) -> list[Text]:
    """Normal: one line per check that ran, worst first, then the skipped ones folded by
    reason; verbose: every check on every node with its time."""
    if detail == "verbose":
        return [_verbose_line(o) for o in report.outcomes]
    grouped: dict[str, list[CheckOutcome]] = defaultdict(list)
    for o in report.outcomes:
        grouped[o.check].append(o)
    many_nodes = len(report.cluster.names) > 1
    skipped = {c: outs for c, outs in grouped.items() if all(o.status is Status.SKIP for o in outs)}
    ran = [(c, outs) for c, outs in grouped.items() if c not in skipped]
    # Worst first (a stable sort: checks of one status keep their registry order).
    ran.sort(key=lambda item: min(_RANK.index(o.status) for o in item[1]))
    lines = [_check_line(c, outs[0].title, outs, many_nodes) for c, outs in ran]
    return lines + _skip_lines(skipped)


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
    """The cross-node stages' tables: SSH mesh, TCP reachability, the allreduce runs."""
    sections = report.sections
    if "ssh_mesh" in sections:
        render_matrix("SSH mesh (rows: from, columns: to)", sections["ssh_mesh"], console)
    if "reachability" in sections:
        title = "TCP reachability, any interface (rows: from, columns: to)"
        render_matrix(title, sections["reachability"], console)
        proven: dict[str, list[str]] = defaultdict(list)
        for node, ifaces in sections["reachability"]["proven"].items():
            proven[", ".join(ifaces) or "nothing"].append(node)
        for ifaces, nodes in sorted(proven.items()):
            # What the interface recommendation may use: the rest is for the reach.* findings.
            console.print(f"  every peer reached {ifaces} on {compact(nodes)}", markup=False)
    allreduce = sections.get("allreduce")
    if allreduce and not allreduce["skipped"]:  # a skip is already its check's line
        render_allreduce(allreduce, console)
