"""The Markdown report: what to paste into a bug report.

Versions per node, the checks, every finding with its fix, and a table for each extra section of
the report (NICs, SSH mesh, topology, ...) whatever stage added it: parts shaped like tables
(records, a map of node to record, a matrix) become tables, anything else is shown as JSON.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from doctor.core.jsonable import jsonable
from doctor.core.model import CheckOutcome, Finding, Missing, Status
from doctor.core.nodeset import compact
from doctor.core.printable import printable
from doctor.facts.node import NodeFacts
from doctor.judge.report import Report

_ICON = {
    Status.PASS: "pass",
    Status.WARN: "**warn**",
    Status.FAIL: "**FAIL**",
    Status.SKIP: "skip",
    Status.CRASH: "**CRASH**",
}
_RANK = [Status.CRASH, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP]


def _text(value: Any) -> str:
    """Text from outside, as text on one line: no HTML a viewer would run (``<img onerror=...>``),
    no control character a terminal would obey when the file is printed, no line of its own (a
    line of backticks would open a code block)."""
    return html.escape(printable(" ".join(str(value).splitlines())), quote=False)


def _fenced(info: str, lines: Iterable[str]) -> list[str]:
    """A code block whose fence no line inside can close: longer than any run of backticks."""
    body = [printable(line) for line in lines]
    longest = max((len(run) for line in body for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", *body, fence, ""]


def _cell(value: Any) -> str:
    if isinstance(value, Missing):
        return f"? ({_text(value.reason)})"
    if value is None or value == "":
        return "—"
    if isinstance(value, (dict, list, tuple)):
        value = json.dumps(jsonable(value), sort_keys=True)
    return _text(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    head = [_cell(h) if h else "" for h in header]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(header)]
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
        lines.append(
            f"- **{_text(name)} could not be probed**: {_text(failure.summary)} (`{failure.code}`)"
        )
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
    lines = [f"### {str(f.severity).upper()}: {_text(f.summary)}", ""]
    lines.append(f"- code: `{f.code}` (check `{f.check}`)")
    if f.nodes:
        lines.append(f"- nodes: {_text(compact(f.nodes))}")
    lines += [f"- seen: {_text(e)}" for e in f.evidence]
    lines.append("")
    if f.fix:
        lines += [f"**Fix:** {_text(f.fix.text)}", ""]
        if f.fix.commands:
            lines += _fenced("sh", f.fix.commands)
    return lines


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _tabular(value: Any) -> tuple[list[str], list[list[Any]]] | None:
    """A value as (header, rows) when it is shaped like a table, else None.

    Shapes: a list of records; a map of key to record (a row per key: nodes, or a matrix's rows);
    a map of key to list of records (a row per record, with the key as first column).
    """
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        header = list(dict.fromkeys(k for r in value for k in r))
        return header, [[r.get(k) for k in header] for r in value]
    if not isinstance(value, dict) or not value:
        return None
    if all(isinstance(v, dict) and all(_scalar(x) for x in v.values()) for v in value.values()):
        inner = dict.fromkeys(k for r in value.values() for k in r)
        # A matrix (rows and columns both nodes) keeps the rows' order across the top.
        header = [k for k in value if k in inner] + [k for k in inner if k not in value]
        return ["", *header], [[key, *(r.get(k) for k in header)] for key, r in value.items()]
    if all(isinstance(v, list) and all(isinstance(i, dict) for i in v) for v in value.values()):
        records = [{"node": key, **i} for key, items in value.items() for i in items]
        return _tabular(records) if records else None
    return None


def _block(value: Any) -> list[str]:
    table = _tabular(value)
    if table is not None:
        return _table(*table)
    if isinstance(value, dict) and value and all(_scalar(v) for v in value.values()):
        return _table(["", "value"], ([k, v] for k, v in value.items()))
    if isinstance(value, list) and all(_scalar(v) for v in value):
        return [", ".join(_cell(v) for v in value) or "—", ""]
    if _scalar(value) or value == {}:
        return [_cell(None if value == {} else value), ""]
    return _fenced("json", json.dumps(value, indent=2, sort_keys=True).splitlines())


def _section(name: str, value: Any) -> list[str]:
    """A report section: one table when it is shaped like one, else a part per key."""
    lines = [f"## {_text(name)}", ""]
    if _tabular(value) is not None or not isinstance(value, dict):
        return lines + _block(value)
    for key, part in value.items():
        lines += [f"### {_text(key)}", "", *_block(part)]
    return lines


def version_columns(facts: dict[str, Any]) -> dict[str, str]:
    """Every version a node's facts name, by where: ``driver``, ``driver.cuda``, ``nccl``, ...

    Found by key (``version`` or ``*_version``) so that fact areas added later show up without
    changes here; several values under one name (NCCL libraries) are joined.
    """
    found: dict[str, list[str]] = {}

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item, path)
        elif isinstance(value, dict) and "missing" not in value:
            for key, item in value.items():
                if key == "version" or key.endswith("_version"):
                    if isinstance(item, str):
                        where = [*path, key.removesuffix("version").rstrip("_")]
                        name = ".".join(p for p in where if p and p not in _CONTAINERS)
                        found.setdefault(name or "version", []).append(item)
                else:
                    walk(item, (*path, key))

    for area, value in facts.items():
        if area != "system":
            walk(value, (area,))
    return {k: ", ".join(dict.fromkeys(v)) for k, v in found.items()}


# Path segments that only hold things and say nothing about what the version is of.
_CONTAINERS = frozenset({"package", "libraries", "frameworks", "runtime"})


def _versions(report: Report) -> list[str]:
    by_node = {name: version_columns(f.to_json()) for name, f in report.cluster.nodes.items()}
    header = list(dict.fromkeys(k for cols in by_node.values() for k in cols))
    if not header:
        return []
    rows = ([name, *(cols.get(k) for k in header)] for name, cols in by_node.items())
    return ["## Versions", "", *_table(["Node", *header], rows)]


def render_markdown(report: Report) -> str:
    """The whole report as GitHub-flavoured Markdown."""
    s = report.summary()
    names = report.cluster.names
    lines = [f"# cluster-doctor {report.command} report", ""]
    lines.append(f"- nodes: {len(names)} ({_text(compact(names))})")
    if s["nodes_failed"]:
        lines.append(f"- unreachable: {s['nodes_failed']}")
    if report.cluster.baseline is not None:
        lines.append(f"- judged against the baseline node {_text(report.cluster.baseline.node)}")
    counts = ", ".join(f"{s[k.value]} {k.value}" for k in Status)
    lines += [f"- result: {counts}", f"- created: {report.created}", ""]
    lines += _nodes(report)
    lines += _versions(report)
    lines += _checks(report)
    lines += ["## Findings", ""]
    if not report.findings:
        lines += ["None.", ""]
    for f in report.findings:
        lines += _finding(f)
    for name, value in report.sections.items():
        lines += _section(name, value)
    return "\n".join(lines).rstrip("\n") + "\n"
