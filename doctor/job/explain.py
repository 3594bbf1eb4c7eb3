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
from doctor.core.nodeset import name_peers
from doctor.explain.catalogue import catalogue
from doctor.explain.engine import findings
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
    """The failed nodes (first failure first) and the known failures in their output, a peer
    named by address named by node too where one node holds it (``owners``: the gate's)."""
    failed = result.failed() or [r for r in result.runs if r.code]
    by_code: dict[str, dict[str, Any]] = {}
    for run in result.runs:
        if not run.log.is_file():
            continue
        for finding in findings(explain([str(run.log)])):
            summary = name_peers(finding.summary, owners, (run.name,))
            entry = by_code.setdefault(
                finding.code, {**jsonable(finding), "summary": summary, "nodes": []}
            )
            entry["nodes"].append(run.name)
    # The hang every node's output shows together (watchdog lines, the rank behind): first.
    logs = {str(r.log): r.name for r in result.runs if r.log.is_file()}
    hung = hang_findings(explain(list(logs), hosts=logs)) if logs else []
    # A cause before its consequences (a lost peer, workers stopped: the catalogue's secondary
    # ones), then the node that failed first.
    order = {r.name: i for i, r in enumerate(failed)}
    secondary = {s.code for s in catalogue() if s.secondary}
    known = sorted(
        by_code.values(),
        key=lambda e: (e["code"] in secondary, min(order.get(n, len(order)) for n in e["nodes"])),
    )
    return {
        "failed": [
            {"node": r.name, "exit_code": r.code, "error": r.error or raised(r)} for r in failed
        ],
        "findings": [jsonable(f) for f in hung] + known,
    }
