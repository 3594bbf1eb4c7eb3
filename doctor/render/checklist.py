"""Check outcomes folded for reading: one row per check, worst first, and the checks skipped
everywhere grouped by their reason. The terminal and the HTML report both list checks this way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.core.model import CheckOutcome, Status

# The order in which a check's per-node statuses decide its one row.
RANK = (Status.CRASH, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)


@dataclass(frozen=True)
class CheckRow:
    """One check: its worst status, the nodes with that status, and (for a crash) why."""

    check: str
    title: str
    status: Status
    nodes: tuple[str, ...]  # the nodes at ``status`` (empty for a cluster-wide check)
    reasons: tuple[str, ...]  # distinct crash messages


@dataclass(frozen=True)
class SkipGroup:
    """Checks skipped on every node for one reason (several reasons of one check are joined)."""

    reason: str
    checks: tuple[tuple[str, str], ...]  # (check, title)


def fold_checks(outcomes: Iterable[CheckOutcome]) -> tuple[list[CheckRow], list[SkipGroup]]:
    """The checks that ran, worst first (stable: one status keeps the registry order), and the
    checks skipped everywhere grouped by reason, the commonest reason first."""
    grouped: dict[str, list[CheckOutcome]] = defaultdict(list)
    for o in outcomes:
        grouped[o.check].append(o)
    rows = []
    by_reason: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for check, outs in grouped.items():
        status = min((o.status for o in outs), key=RANK.index)
        if status is Status.SKIP:
            by_reason["; ".join(sorted({o.reason for o in outs}))].append((check, outs[0].title))
            continue
        worst = [o for o in outs if o.status is status]
        reasons = sorted({o.reason for o in worst}) if status is Status.CRASH else []
        nodes = tuple(o.node for o in worst if o.node)
        rows.append(CheckRow(check, outs[0].title, status, nodes, tuple(reasons)))
    rows.sort(key=lambda r: RANK.index(r.status))
    groups = [SkipGroup(reason, tuple(checks)) for reason, checks in by_reason.items()]
    groups.sort(key=lambda g: -len(g.checks))
    return rows, groups
