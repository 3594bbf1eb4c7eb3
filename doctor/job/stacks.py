"""`doctor stacks`, and the look `doctor run` takes at a job that stopped making progress.

The stacks stage on every node (doctor/stages/stacks.py); then, when every rank waits in the
same collective (no rank is behind: the network is), the probe and the reachability stage on the
job's nodes, so the node or pair that no longer connects is named; then the hang check and the
reachability check judge. The report's ``stacks`` section holds where every rank is.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.cluster import ClusterFacts
from doctor.facts.hang.flight import who
from doctor.facts.hang.shape import HangView, hang_view
from doctor.facts.hang.stacks import JobProcess, StacksFacts
from doctor.facts.network.reach import Reachability
from doctor.job.settings import StacksSettings
from doctor.judge.report import Report
from doctor.judge.runner import run_checks
from doctor.nodes.connect import WORKERS
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, Transport
from doctor.plugin import CheckSpec
from doctor.stages.stacks import look

if TYPE_CHECKING:
    from doctor.facts.node import NodeFacts

FRAMES_SHOWN = 12


def look_at_job(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    settings: StacksSettings,
    checks: tuple[CheckSpec, ...],
    python: str | None,
    job: str = "",
    command: str = "stacks",
) -> Report:
    """Where every rank of the job is, judged."""
    facts = look(nodes, transport, settings.look(job), python, WORKERS)
    views = [hang_view(facts, j) for j in facts.jobs()]
    probed: dict[str, NodeFacts] = {}
    reach: Reachability | Missing = Missing("reachability not tested")
    held = [n for n in nodes if n.name in facts.nodes and not _empty(facts, n.name)]
    remote = not all(n.local for n in nodes)
    symmetric = any(v.shape() == "symmetric" for v in views)
    if symmetric and settings.links and remote and len(held) > 1:
        probed, reach = _links(held, transport, checks, python, command)
    cluster = ClusterFacts(
        nodes=probed,
        failures=dict(facts.failures),
        inventory={n.name: n for n in nodes},
        reachability=reach,
        stacks=facts,
    )
    sections: dict[str, Any] = {"stacks": stacks_section(facts, views)}
    if isinstance(reach, Reachability):
        sections["reachability"] = reach.to_section()
    return Report.build(command, cluster, run_checks(checks, cluster), sections)


def _links(
    held: list[Node],
    transport: Transport | BatchTransport,
    checks: tuple[CheckSpec, ...],
    python: str | None,
    command: str,
) -> tuple[dict[str, NodeFacts], Reachability | Missing]:
    """TCP among the job's nodes (probed first: the reachability stage tests each interface).
    Imported here: only a hang with every rank in one collective needs the probe's parsers."""
    from doctor.facts.node import parse_node
    from doctor.pipeline.request import Request
    from doctor.pipeline.steps import derive, probe_spec
    from doctor.stages.collect import gather
    from doctor.stages.pairs import Sampling
    from doctor.stages.reach import run_reach

    spec = probe_spec(Request(command, checks=checks), [])
    results = gather(held, transport, spec, python=python, workers=WORKERS)
    probed = {n: parse_node(n, c) for n, c in results.items() if isinstance(c, Capture)}
    answered = [n for n in held if n.name in probed]
    reach = run_reach(
        probed,
        answered,
        transport,
        mode=Sampling.full,
        seed=random.SystemRandom().randrange(1 << 31),
        python=python,
        workers=WORKERS,
    )
    return derive(probed, reach), reach


def _empty(facts: StacksFacts, node: str) -> bool:
    return not any(p.role == "rank" for p in facts.nodes[node].processes)


def _rank_json(p: JobProcess, view: HangView, facts: StacksFacts) -> dict[str, Any]:
    where = view.positions.get(who(p))
    moved = next((why for r, why in view.moving if r is p), None)
    return {
        "rank": p.rank,
        "node": p.node,
        "pid": p.pid,
        "world_size": p.world_size,
        "local_rank": p.number("LOCAL_RANK"),
        "state": p.last.state if p.last else None,
        "wchan": p.last.wchan if p.last else None,
        "position": where.describe() if where else None,
        "kind": where.kind if where else None,
        "frames": _frames(p),
        "threads": len(p.threads),
        "moved": moved,
        "stack_error": p.stack_error,
        "flight_recorder": p.flight is not None,
        "children": [
            {"pid": c.pid, "frames": _frames(c), "wchan": c.last.wchan if c.last else None}
            for c in facts.children(p)
        ],
    }


def _frames(p: JobProcess) -> list[str]:
    thread = p.main_thread()
    return [f.where() for f in (thread.frames if thread else ())][:FRAMES_SHOWN]


def stacks_section(facts: StacksFacts, views: list[HangView]) -> dict[str, Any]:
    """Where every rank is, grouped, job by job: the report's ``stacks`` section."""
    return {
        "window": facts.window,
        "nodes": sorted(facts.nodes),
        "silent": {n: f.summary for n, f in facts.failures.items()},
        "tools": {n: s.tool for n, s in facts.nodes.items()},
        "jobs": [
            {
                "job": view.job,
                "shape": view.shape(),
                "world_size": view.world,
                "groups": [
                    {
                        "count": len(g.ranks),
                        "waits": g.waits,
                        "position": g.position.describe(),
                        "ranks": [{"rank": r.rank, "node": r.node, "pid": r.pid} for r in g.ranks],
                    }
                    for g in view.groups
                ],
                "ranks": [_rank_json(p, view, facts) for p in facts.ranks(view.job)],
                "ras": view.ras is not None,
                "flight_recorder": bool(view.flight and view.flight.pending)
                or any(p.flight is not None for p in facts.ranks(view.job)),
            }
            for view in views
        ],
    }
