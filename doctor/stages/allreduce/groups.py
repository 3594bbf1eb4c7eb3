"""Group testing on real nodes: when the allreduce across every node failed, hung or ran slow,
the search's rounds (search.py) run as small allreduces, each group the stage's own plan
(run.py) on its nodes, every group of a round at once.

A group's test sends one size, large enough that a slow link's time is its bytes and not the
ranks' latency: a ring of n ranks meets 2(n-1) times per allreduce, each meeting milliseconds on a
loaded machine, while a slow link's share is about twice the size whatever n. So the size grows
with the group (RANK_BYTES a rank, from 1 MiB to 4 MiB): what one step carries stays the same.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from statistics import median
from typing import Any

from doctor.facts.allreduce import MIN_LINK_BYTES, Plan, Rank, RunResult
from doctor.facts.groups import GroupSearch
from doctor.nodes.transport.launch import Launcher
from doctor.stages.allreduce.run import run_plan
from doctor.stages.allreduce.search import MIN_GAP, Stopped, Trial, search

RANK_BYTES = 128 << 10
TEST_BYTES = (1 << 20, 4 << 20)  # the least and the most a group's test sends
MIN_NODES = 4  # fewer: no two parts of two nodes, nor a control beside a suspect
WAIT = 0.2  # seconds between looks at a round's groups (Ctrl-C is seen in between)


def slow_links(run: RunResult) -> list[dict[str, Any]]:
    """The ring links a search's gap below the typical link (the median of all, those that
    waited for a CPU included: they ran at least that fast), that did not mostly wait for a CPU
    themselves."""
    links = [r for r in run.link_rows() if r["src"] != r["dst"] and r["bytes"] >= MIN_LINK_BYTES]
    if len(links) < 3:
        return []
    typical = median(r["gbps"] for r in links)
    return [r for r in links if not r["cpu_bound"] and r["gbps"] * MIN_GAP < typical]


def search_mode(runs: tuple[RunResult, ...]) -> str | None:
    """What makes the allreduce across every node a positive: ``fail`` (it failed or hung),
    ``slow`` (it passed with links far below the others), or None: nothing to search for, or
    a cause no node holds (the recommended settings pass; the ranks were still starting)."""
    if not runs or any(r.status == "passed" for r in runs[1:]):
        return None
    configured = runs[0]
    if configured.status in ("failed", "timeout") and not configured.slow_start:
        return "fail"
    if configured.status == "passed" and slow_links(configured):
        return "slow"
    return None


def trial(run: RunResult) -> Trial:
    """How one group went: a run that proved nothing (its ranks still starting, the port
    taken, rank 0 not yet answering) is neither a pass nor a failure."""
    rows = run.sweep_rows()
    busbw = float(rows[-1]["busbw_gbps"]) if rows else None
    master_silent = run.status == "not_started" and not (run.ranks and run.ranks[0].failed)
    passed: bool | None = run.status == "passed"
    if run.slow_start or run.port_taken or run.status == "interrupted" or master_silent:
        passed = None
    return Trial(passed, busbw, run.seconds, run.headline())


def group_plan(plan: Plan, group: tuple[str, ...]) -> Plan:
    """The whole run's plan on the ranks of ``group``'s nodes, numbered from 0."""
    ranks = [r for r in plan.ranks if r.node.name in group]
    low, high = TEST_BYTES
    return replace(
        plan,
        ranks=tuple(Rank(i, r.node, r.local_rank) for i, r in enumerate(ranks)),
        sizes=(min(high, max(low, RANK_BYTES * len(ranks))),),
        link_bytes=MIN_LINK_BYTES,
    )


def find_culprits(
    plan: Plan, launcher: Launcher, mode: str, iface: str | None = None
) -> GroupSearch:
    """Group testing over the plan's nodes (its ranks' environment, deadlines and port)."""

    def run_round(groups: list[tuple[str, ...]]) -> list[Trial]:
        results: list[Trial] = [Trial(None, headline="not run")] * len(groups)

        def one(i: int) -> None:
            label = f"group {','.join(groups[i])}"
            try:
                results[i] = trial(run_plan(group_plan(plan, groups[i]), launcher, label, iface))
            except Exception as exc:  # the doctor's own fault: the group proved nothing
                results[i] = Trial(None, headline=f"{type(exc).__name__}: {exc}")

        # Daemon threads: on Ctrl-C the search ends here; the ranks end with the doctor
        # (their lifeline is its connection).
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(groups))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(WAIT)
        except KeyboardInterrupt:
            raise Stopped("interrupted") from None
        return results

    names = list(dict.fromkeys(r.node.name for r in plan.ranks))
    return search(names, run_round, mode=mode)
