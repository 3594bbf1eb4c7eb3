"""The Markdown report: what to paste into a bug report.

Versions per node, the checks, every finding with its fix, and a table for each extra section of
the report (NICs, topology, ...) whatever stage added it: a section that is a list of records, or
a map of node to records, becomes a table; anything else is shown as JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from doctor.facts.node import NodeFacts
from doctor.jsonable import jsonable
from doctor.model import CheckOutcome, Finding, Missing, Status
from doctor.nodeset import compact
from doctor.report import Report

_ICON = {
    Status.PASS: "pass",
    Status.WARN: "**warn**",
    Status.FAIL: "**FAIL**",
    Status.SKIP: "skip",
    Status.CRASH: "**CRASH**",
}
_RANK = [Status.CRASH, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP]


def _cell(value: Any) -> str:
    if isinstance(value, Missing):
        return f"? ({value.reason})"
    if value is None or value == "":
        return "—"
    if isinstance(value, (dict, list, tuple)):
        value = json.dumps(jsonable(value), sort_keys=True)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _system_row(name: str, facts: NodeFacts) -> list[Any]:
    s = facts.system
    if isinstance(s, Missing):
        return [name, s, s, s, s]
    return [name, s.os_name, s.kernel, s.python, s.container or "bare metal"]


def _nodes(report: Report) -> list[str]:
    cluster = report.cluster
    rows = [_system_row(name, f) for name, f in cluster.nodes.items()]
    if cluster.baseline is not None:
        rows.append(_system_row(f"{cluster.baseline.node} (baseline)", cluster.baseline))
    lines = ["## Nodes", ""]
    lines += _table(["Node", "OS", "Kernel", "Python", "Container"], rows)
    for name, failure in cluster.failures.items():
        lines.append(f"- **{name} could not be probed**: {failure.summary} (`{failure.code}`)")
    if cluster.failures:
        lines.append("")
    return lines


def _checks(report: Report) -> list[str]:
    grouped: dict[str, list[CheckOutcome]] = defaultdict(list)
    for o in report.outcomes:
        grouped[o.check].append(o)
    rows = []
    for check, outcomes in grouped.items():
        statuses = {o.status for o in outcomes}
        status = next(s for s in _RANK if s in statuses)
        nodes = [o.node for o in outcomes if o.status is status and o.node]
        reasons = sorted({o.reason for o in outcomes if o.status is status and o.reason})
        many = len(report.cluster.names) > 1 and status not in (Status.PASS, Status.SKIP)
        where = compact(nodes) if nodes and many else ""
        rows.append([f"`{check}`", _ICON[status], outcomes[0].title, where, "; ".join(reasons)])
    return ["## Checks", "", *_table(["Check", "Result", "What", "Nodes", "Note"], rows)]


def _finding(f: Finding) -> list[str]:
    lines = [f"### {str(f.severity).upper()}: {f.summary}", ""]
    lines.append(f"- code: `{f.code}` (check `{f.check}`)")
    if f.nodes:
        lines.append(f"- nodes: {compact(f.nodes)}")
    lines += [f"- seen: {e}" for e in f.evidence]
    lines.append("")
    if f.fix:
        lines += [f"**Fix:** {f.fix.text}", ""]
        if f.fix.commands:
            lines += ["```sh", *f.fix.commands, "```", ""]
    return lines


def _records(value: Any) -> list[dict[str, Any]] | None:
    """A section as rows for one table, or None when it is not shaped like records."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        rows = []
        for key, items in value.items():
            if not all(isinstance(i, dict) for i in items):
                return None
            rows += [{"node": key, **i} for i in items]
        return rows or None
    return None


def _section(name: str, value: Any) -> list[str]:
    lines = [f"## {name}", ""]
    rows = _records(value)
    if rows is None:
        return [*lines, "```json", json.dumps(value, indent=2, sort_keys=True), "```", ""]
    header = list(dict.fromkeys(k for r in rows for k in r))
    return lines + _table(header, ([r.get(k) for k in header] for r in rows))


def render_markdown(report: Report) -> str:
    """The whole report as GitHub-flavoured Markdown."""
    s = report.summary()
    names = report.cluster.names
    lines = [f"# cluster-doctor {report.command} report", ""]
    lines.append(f"- nodes: {len(names)} ({compact(names)})")
    if s["nodes_failed"]:
        lines.append(f"- unreachable: {s['nodes_failed']}")
    if report.cluster.baseline is not None:
        lines.append(f"- judged against the baseline node {report.cluster.baseline.node}")
    counts = ", ".join(f"{s[k.value]} {k.value}" for k in Status)
    lines += [f"- result: {counts}", f"- created: {report.created}", ""]
    lines += _nodes(report)
    lines += _checks(report)
    lines += ["## Findings", ""]
    if not report.findings:
        lines += ["None.", ""]
    for f in report.findings:
        lines += _finding(f)
    for name, value in report.sections.items():
        lines += _section(name, value)
    return "\n".join(lines).rstrip("\n") + "\n"
