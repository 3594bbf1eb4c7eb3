"""Why the job failed: every node's whole output through `doctor explain`'s engine.

Each node's log is read on its own, so every known failure is named with the nodes whose
output shows it, the node that failed first leading. A failure no signature knows is still
named: the last line of the Python traceback the node printed (``ValueError: ...``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from doctor.core.jsonable import jsonable
from doctor.core.model import Finding, Severity
from doctor.core.nodeset import name_peers
from doctor.explain.catalogue import Signature, catalogue
from doctor.explain.engine import findings
from doctor.explain.explanation import TIERS, tier
from doctor.explain.scan import explain
from doctor.job.spread import JobResult, NodeRun
from doctor.render.explain import hang_findings

# A Python traceback's head, and its last line: the exception's name and message. Launcher
# prefixes ([rank1]:, [node2]) are allowed in front of both.
_PREFIX = rb"^(?:\[[^\]]*\]:?\s*)*"
_TRACEBACK = re.compile(_PREFIX + rb"Traceback \(most recent call last\):")
_RAISED = re.compile(
    _PREFIX + rb"((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit))(?::\s?(.*))?$"
)
MAX_ERROR = 300
MAX_LOG_TAIL = 16 << 20  # bytes of a node's output read for its traceback: the end, where it is


def raised(run: NodeRun) -> str | None:
    """The exception that ended the node's first traceback (the program's own error comes
    before the launcher's report of it), if any."""
    try:
        with run.log.open("rb") as log:  # the doctor's own file; a chatty job's is large
            size = os.fstat(log.fileno()).st_size
            log.seek(max(0, size - MAX_LOG_TAIL))
            data = log.read(MAX_LOG_TAIL)
    except OSError:
        return None
    in_traceback = False
    for line in data.splitlines():
        line = line.rstrip()
        if _TRACEBACK.match(line):
            in_traceback = True
        elif in_traceback and (match := _RAISED.match(line)):
            return match.group(0)[match.start(1) :].decode("utf-8", "replace")[:MAX_ERROR]
    return None


def job_explanation(result: JobResult, owners: dict[str, str]) -> dict[str, Any]:
    """The failed nodes (first failure first), the known failures in their output, and the
    culprits: the nodes those failures name as the cause (a peer named by address named by node
    where one node holds it: ``owners``, the gate's), never a node that only reported one."""
    failed = result.failed() or [r for r in result.runs if r.code]
    by_code: dict[str, dict[str, Any]] = {}
    for run in result.runs:
        if not run.log.is_file():
            continue
        log = str(run.log)
        for finding in findings(explain([log], hosts={log: run.name})):
            _merge(by_code, finding, run.name, owners)
    # The hang every node's output shows together (watchdog lines, the rank behind): first.
    logs = {str(r.log): r.name for r in result.runs if r.log.is_file()}
    hung = hang_findings(explain(list(logs), hosts=logs)) if logs else []
    # A cause before its consequences, then the node that failed first.
    order = {r.name: i for i, r in enumerate(failed)}
    sig = {s.code: s for s in catalogue()}
    known = sorted(
        by_code.values(),
        key=lambda e: (
            tier(sig[e["code"]]) if e["code"] in sig else TIERS,
            min(order.get(n, len(order)) for n in e["seen_on"]),
        ),
    )
    return {
        "failed": [
            {"node": r.name, "exit_code": r.code, "error": r.error or raised(r)} for r in failed
        ],
        "findings": [jsonable(f) for f in hung] + known,
        "culprits": culprits(hung, known, sig, failed),
    }


def _merge(
    by_code: dict[str, dict[str, Any]], finding: Finding, node: str, owners: dict[str, str]
) -> None:
    """One node's finding into the job's entry for its code: the culprits of every node's
    output, by node name; the nodes that only reported it; the nodes whose output shows it."""
    summary = name_peers(finding.summary, owners, (node,))
    entry = by_code.setdefault(
        finding.code, {**jsonable(finding), "summary": summary, "nodes": [], "seen_on": []}
    )
    # A peer the log named by an address no line of it tied to a host: the gate's nodes may.
    peers = [p["address"] for p in finding.data.get("suspects", []) if p.get("node") is None]
    named = {*(owners.get(n, n) for n in finding.nodes), *(owners[a] for a in peers if a in owners)}
    entry["nodes"] = sorted({*entry["nodes"], *named})
    entry["seen_on"].append(node)
    reported = finding.data.get("reported_by")
    if reported:
        into = entry["data"].setdefault("reported_by", {"nodes": [], "ranks": []})
        nodes = {owners.get(n, n) for n in reported["nodes"]} - set(entry["nodes"])
        into["nodes"] = sorted({*into["nodes"], *nodes} - set(entry["nodes"]))
        into["ranks"] = sorted({*into["ranks"], *reported["ranks"]})


def culprits(
    hung: list[Finding],
    known: list[dict[str, Any]],
    sig: dict[str, Signature],
    failed: list[NodeRun],
) -> list[str]:
    """The nodes the job's failure names as its cause: the hang's verdict's, else those of the
    surest failures seen (a cause's class; a consequence's, such as a lost peer, only where no
    cause names one); else the one node whose command failed by itself, where only one did."""
    named = sorted({n for f in hung if f.severity is Severity.FAIL for n in f.nodes})
    if named:
        return named
    by_tier: dict[int, set[str]] = {}
    for entry in known:
        if entry["severity"] in ("fail", "warn") and entry["nodes"] and entry["code"] in sig:
            by_tier.setdefault(tier(sig[entry["code"]]), set()).update(entry["nodes"])
    if by_tier:
        return sorted(by_tier[min(by_tier)])
    return [failed[0].name] if len(failed) == 1 else []
