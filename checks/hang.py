"""A running job that makes no progress: which rank, on which node, at which line, and why.

Judged from every rank's stack and /proc state (the stacks agent), Flight Recorder and NCCL's RAS
where they were armed, and, when every rank waits in the same collective, the TCP links among the
job's nodes (the reachability stage). The shape comes from doctor/facts/hang/shape.py; each shape is
one finding that names only the odd ranks and their nodes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from checks.job import job
from checks.stage import whole_nodes
from doctor.core.model import Finding, Fix, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import command, commands
from doctor.facts.hang.flight import who
from doctor.facts.hang.shape import Gone, Group, HangView, hang_view
from doctor.facts.hang.stacks import JobProcess, StacksFacts
from doctor.facts.network.reach import Reachability
from doctor.plugin import Skip, cluster_check, need

if TYPE_CHECKING:  # only a type here: the cluster's facts import every parser
    from doctor.facts.cluster import ClusterFacts

CODES = {
    "hang.outside_collective": "some ranks wait in a collective while others are elsewhere (a "
    "DataLoader worker, I/O, a lock, a sleep, a breakpoint): those ranks hold the job",
    "hang.mismatch": "ranks called different collectives (op, sizes or call site) at the same "
    "step: neither side can finish",
    "hang.rank_gone": "a rank of the job has no process any more; the others wait for it",
    "hang.node_silent": "a node of the job did not answer: its ranks gave no evidence",
    "hang.agent_failed": "the doctor's stacks agent broke on a node (it is named in "
    "hang.node_silent's data)",
    "hang.symmetric": "every rank waits in the same collective: no rank is behind, the network is",
    "hang.first_collective": "every rank waits in its first collective: the ranks never completed "
    "one together, so the path between them (interface, firewall, NCCL's network plugin) is at "
    "fault, not a rank",
    "hang.one_rank": "the text shows one rank only, which reported the timeout: it cannot name "
    "the rank that held it",
    "hang.no_evidence": "a rank's stack could not be taken (ptrace refused, py-spy missing, gone)",
    "hang.no_job": "a node holds no rank of the job",
    "hang.stalled": "no rank waits in a collective and none moved: every rank is stuck elsewhere",
    "hang.progressing": "ranks moved while they were looked at: the job is not hung",
}


def ranks_text(ranks: list[JobProcess] | tuple[JobProcess, ...]) -> str:
    numbers = sorted({r.rank for r in ranks if r.rank is not None})
    if not numbers:  # text may give no rank: the pids, else how many processes
        pids = sorted({r.pid for r in ranks if r.pid > 0})
        if pids and len(pids) == len(ranks):
            return f"pid{'s' if len(pids) != 1 else ''} {', '.join(str(p) for p in pids)}"
        return "a process" if len(ranks) == 1 else f"{len(ranks)} processes"
    shown = compact([str(n) for n in numbers])
    return f"rank{'s' if len(numbers) != 1 else ''} {shown.strip('[]')}"


def group_text(group: Group) -> str:
    known = sorted({r.node for r in group.ranks if r.node})
    nodes = f" ({compact(known)})" if known else ""  # text may not say where ranks ran
    return f"{ranks_text(group.ranks)}{nodes}: {group.position.describe()}"


def _on(nodes: tuple[str, ...] | list[str]) -> str:
    return f" on {compact(list(nodes))}" if nodes else ""


def waited(view: HangView) -> str:
    groups = view.waiting
    if groups:
        return "; ".join(f"{len(g.ranks)} wait: {group_text(g)}" for g in groups)
    lags = view.ras.lags if view.ras else []
    if lags:  # NCCL's host threads wait in .item() or a synchronize: RAS knows who is ahead
        late = {lag.rank.rank for lag in lags if lag.op == lags[0].op}
        ahead = [r for g in view.groups for r in g.ranks if r.rank not in late]
        if ahead:
            verb = "waits" if len(ahead) == 1 else "wait"
            op, most = lags[0].op, lags[0].most
            return f"{ranks_text(ahead)} launched {op} #{most} and {verb} for it (NCCL RAS)"
    return "no rank waits in a collective" if view.live else ""


@cluster_check(
    "hang",
    "A running job's ranks: who holds the others up, and where",
    needs=("stacks",),
    codes=CODES,
)
def hang(cluster: ClusterFacts) -> Iterator[Finding]:
    stacks = need(cluster.stacks)
    if not stacks.jobs() and not stacks.failures:
        raise Skip("no rank of a training job found on any node")
    yield from verdict(stacks, cluster.reachability)


def verdict(stacks: StacksFacts, reach: Reachability | object = None) -> Iterator[Finding]:
    """The findings on a hang, whether the doctor looked at the ranks itself (doctor stacks,
    doctor run) or read what the job left behind (doctor explain): one model, one wording."""
    jobs = stacks.jobs()
    views = [hang_view(stacks, job) for job in jobs] or [hang_view(stacks, "")]
    yield from _silent(views[0])
    lost = {g.node for view in views for g in view.gone}
    for node in (n for n in views[0].empty if n not in lost):
        yield Finding(
            "hang.no_job",
            Severity.WARN,
            f"{node} holds no rank of a training job (no Python process with a rank in its "
            "environment there)",
            nodes=(node,),
            fix=Fix("If the job should run there, its launcher never started it on that node."),
        )
    for view in views:
        for finding in _judged(view, reach):
            # Several jobs on the nodes (a leftover one holds ports and GPUs): say whose.
            yield (
                replace(finding, summary=f"{view.job}: {finding.summary}")
                if len(views) > 1
                else finding
            )


def _judged(view: HangView, reach: Reachability | object) -> Iterator[Finding]:
    yield from _gone(view)
    yield from _blind(view)
    waiting = tuple(r for g in view.waiting for r in g.ranks)
    if _moving(view, waiting):  # a collective finished while looked at: nothing is stuck
        yield _progressing(view, waiting)
        return
    yield from _mismatch(view)
    yield from _outside(view)
    shape = view.shape()
    if shape == "symmetric" and not view.live and len(view.ranks) == 1:
        yield _one_rank(view)
    elif shape == "symmetric" and view.first_collective():
        yield _first_collective(view, reach)
    elif shape == "symmetric":
        yield _symmetric(view, reach)
    if shape == "idle":
        yield _idle(view)


def _data(view: HangView, cause: Sequence[JobProcess], **more: Any) -> dict[str, Any]:
    """The findings' contract: ``ranks`` are the ranks named as the cause (odd, behind, gone),
    never those that only waited or reported, which are under ``reported_by`` with their nodes
    (doctor explain's findings say the same); ``pids`` and the collective the others wait in go
    with them."""
    named = {who(r) for r in cause}
    numbers = sorted({r.rank for r in cause if r.rank is not None})
    waited = [r for r in view.ranks if who(r) not in named and r.rank is not None]
    nodes = {r.node for r in cause if r.node}
    reported = {
        "nodes": sorted({r.node for r in waited if r.node} - nodes),
        "ranks": sorted({r.rank for r in waited if r.rank is not None}),
    }
    data: dict[str, Any] = {"ranks": [n for n in numbers], "reported_by": reported}
    data["pids"] = [
        {"rank": r.rank, "node": r.node, "pid": max(r.pid, 0)} for r in cause if r.pid > 0 or r.node
    ]
    if view.waiting:
        data["collective"] = view.waiting[0].position.describe()
    data["evidence_from"] = "the ranks themselves" if view.live else "text the job left"
    return data | more


def _moving(view: HangView, ranks: tuple[JobProcess, ...]) -> list[str]:
    pids = {(r.node, r.pid) for r in ranks}
    return [f"{r.label()} moved: {why}" for r, why in view.moving if (r.node, r.pid) in pids]


def _silent(view: HangView) -> Iterator[Finding]:
    for node, failure in view.silent.items():
        yield Finding(
            "hang.node_silent",
            Severity.FAIL,
            f"{node} did not answer ({failure.summary}): its ranks gave no evidence; "
            + waited(view),
            nodes=(node,),
            evidence=(failure.detail,) if failure.detail else (),
            fix=Fix(
                f"{node} is down, hung, or cut off from the network: the others wait for its "
                "ranks. Check it from another node.",
                (
                    command("ping -c 3 {}", node),
                    command("doctor preflight -H {} --no-allreduce", node),
                ),
            ),
            data=_data(view, [], code=failure.code),
        )


def _gone(view: HangView) -> Iterator[Finding]:
    by_node: dict[str | None, list[Gone]] = {}
    for gone in view.gone:
        by_node.setdefault(gone.node, []).append(gone)
    for node, lost in by_node.items():
        numbered = {g.rank for g in lost}
        numbers = compact([str(g.rank) for g in lost]).strip("[]")
        ranks = f"rank {numbers} is" if len(lost) == 1 else f"ranks {numbers} are"
        where = f" on {node}" if node else ""
        yield Finding(
            "hang.rank_gone",
            Severity.FAIL,
            f"{ranks} gone{where}: {lost[0].why}" + (f"; {w}" if (w := waited(view)) else ""),
            nodes=(node,) if node else (),
            evidence=tuple(g.why for g in lost[1:]),
            fix=Fix(
                "Its process ended without ending the job: the kernel's OOM killer, a signal, "
                f"or a crash the launcher did not report. Look at {node or 'its node'}'s kernel "
                "log and the rank's own output; restart the job.",
                (
                    command(
                        "ssh {} 'dmesg -T | grep -i -E \"killed process|out of memory|segfault\"'",
                        node or "NODE",
                    ),
                ),
            ),
            # A gone rank whose text is here (a crash's dump) is the cause, not one that waited.
            data=_data(view, [r for r in view.ranks if r.rank in numbered])
            | {"ranks": [g.rank for g in lost]},
        )


def _mismatch(view: HangView) -> Iterator[Finding]:
    m = view.mismatch
    if m is None:
        return
    odd = m.minority()
    sides = [f"{ranks_text(list(v))}: {label}" for label, v in m.sides.items()]
    what = {"op": "collectives", "sizes": "sizes", "call site": "call sites"}[m.what]
    yield Finding(
        "hang.mismatch",
        Severity.FAIL,
        f"ranks called different {what} at the same step ({m.source}): " + "; ".join(sides),
        nodes=tuple(sorted({r.node for r in odd if r.node})),
        evidence=tuple(sides),
        fix=Fix(
            "Every rank of a process group must call the same collectives, in the same order, "
            "with the same shapes: look for a branch on the rank, an uneven last batch, or a "
            "collective inside a condition. TORCH_DISTRIBUTED_DEBUG=DETAIL makes torch check "
            "each collective's shapes across ranks and fail at the first that differs.",
            commands("export TORCH_DISTRIBUTED_DEBUG=DETAIL"),
        ),
        data=_data(view, odd, sides={k: [r.rank for r in v] for k, v in m.sides.items()}),
    )


def _outside(view: HangView) -> Iterator[Finding]:
    if not view.odd or view.mismatch:
        return
    lines = []
    for odd in view.odd:
        at = f" at {odd.position.describe()}" if odd.position.kind != "unknown" else ""
        line = f"{odd.process.label()}{at} ({odd.why})"
        if odd.child:
            child, where = odd.child
            line += f"; its worker pid {child.pid} at {where.describe()}"
        lines.append(line)
    odd_ranks = [o.process for o in view.odd]
    nodes = tuple(sorted({r.node for r in odd_ranks if r.node}))
    waiting = sum(len(g.ranks) for g in view.waiting)
    meanwhile = f" while {waiting} wait in {view.waiting[0].position.describe()}" if waiting else ""
    holds = "holds" if len(odd_ranks) == 1 else "hold"
    yield Finding(
        "hang.outside_collective",
        Severity.FAIL,
        f"{ranks_text(odd_ranks)}{_on(nodes)} {holds} the job{meanwhile}: {lines[0]}",
        nodes=nodes,
        evidence=tuple(e for e in (*lines[1:], waited(view)) if e),
        fix=Fix(
            "The named rank holds every other rank: look at its line. Usual causes: a DataLoader "
            "worker stuck on I/O or a lock, one rank with fewer batches (an uneven last batch or "
            "a rank-dependent condition), a breakpoint or input(), a slow checkpoint on one "
            "rank only.",
            tuple(
                command("ssh {} py-spy dump --pid {} --native", o.process.node, o.process.pid)
                for o in view.odd[:3]
                if o.process.node and o.process.pid > 0
            ),
        ),
        data=_data(view, odd_ranks),
    )


def _blind(view: HangView) -> Iterator[Finding]:
    for process, why in view.blind:
        yield Finding(
            "hang.no_evidence",
            Severity.WARN,
            f"no stack of {process.label()}: {why}",
            nodes=(process.node,),
            fix=Fix(
                "py-spy needs to ptrace the rank: run the doctor as root or as the job's user, "
                "with kernel.yama.ptrace_scope 0 or 1 (a container needs CAP_SYS_PTRACE).",
                commands("sysctl kernel.yama.ptrace_scope", "docker run --cap-add SYS_PTRACE ..."),
            ),
        )


def _symmetric(view: HangView, reach: Reachability | object) -> Finding:
    (group,) = view.groups
    evidence = [group_text(group)]
    nodes: tuple[str, ...] = ()
    cut = "the links among its nodes were not tested"
    if isinstance(reach, Reachability):
        failed = {
            (s, t): status not in ("ok", "wrong_source")
            for s in reach.nodes
            for t in reach.nodes
            if (status := reach.pair_status(s, t)) not in (None, "not_tested")
        }
        unreached, cut_off = whole_nodes(failed)
        bad_pairs = sorted(p for p, bad in failed.items() if bad)
        nodes = tuple(sorted(set(unreached) | cut_off))
        if nodes:
            cut = f"{compact(list(nodes))} no longer connects to the other nodes over TCP"
        elif bad_pairs:
            # Too few peers to blame one node by its links alone (a 3-node job): the node in
            # every broken pair is still the one.
            common = set.intersection(*(set(pair) for pair in bad_pairs))
            nodes = tuple(sorted(common or {n for pair in bad_pairs for n in pair}))
            pairs = ", ".join(f"{s}->{t}" for s, t in bad_pairs)
            cut = (
                f"{nodes[0]} no longer connects to the other nodes over TCP ({pairs})"
                if len(common) == 1
                else f"these pairs no longer connect: {pairs}"
            )
        else:
            cut = "every link among its nodes connects now"
        evidence.append(f"TCP among {compact(list(reach.nodes))}: {cut}")
    every = (
        "every rank" if view.live else f"every rank whose text is here ({ranks_text(group.ranks)})"
    )
    return Finding(
        "hang.symmetric",
        Severity.FAIL,
        f"{every} waits in the same collective ({group.position.describe()}): no rank is "
        f"behind; {cut}",
        nodes=nodes,
        evidence=tuple(evidence),
        fix=Fix(
            "A hang with every rank in one collective is the transport's: a link, a switch port "
            "or a NIC between the nodes. Compare with a fresh preflight of the same nodes.",
            (command("doctor preflight -H {}", _hosts(group.ranks)),),
        ),
        data=_data(view, []),
    )


def _hosts(ranks: Sequence[JobProcess]) -> str:
    return ",".join(sorted({r.node for r in ranks if r.node})) or "<the job's nodes>"


def _first_collective(view: HangView, reach: Reachability | object) -> Finding:
    """Every rank waits in collective #1 of its group: no rank is behind, none ever got through."""
    (group,) = view.groups
    nodes = sorted({r.node for r in group.ranks if r.node})
    between = f"between {compact(nodes)}" if len(nodes) > 1 else "between the ranks"
    found = _symmetric(view, reach)
    return Finding(
        "hang.first_collective",
        Severity.FAIL,
        f"every rank waits in its first collective ({group.position.describe()}): no rank is "
        f"behind; the ranks never completed one together, so the path {between} is at fault "
        "(the interface NCCL chose, a firewall, NCCL's network plugin), not a rank",
        nodes=found.nodes,
        evidence=found.evidence,
        fix=Fix(
            "Check the path the ranks use before the job: the doctor's preflight of the same "
            "nodes tests TCP between every pair on the interfaces NCCL and Gloo will pick "
            "(reach.*, nics.*) and says what to set (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, the "
            "firewall's ports); NCCL_DEBUG=INFO shows which interface and network it took.",
            (
                command("doctor preflight -H {}", _hosts(group.ranks)),
                command("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ..."),
            ),
        ),
        data=_data(view, [], related_checks=["reach.tcp", "nics.nccl"]),
    )


def _one_rank(view: HangView) -> Finding:
    """The text of one rank that waited: it says what it waited in, not who held it."""
    (rank,) = view.ranks
    where = view.positions[who(rank)].describe()
    return Finding(
        "hang.one_rank",
        Severity.WARN,
        f"only {rank.label()}'s text is here: it waits in {where}; which rank held it, the "
        "text of one rank cannot say",
        nodes=(),
        fix=Fix(
            "Give the doctor every rank's output (torchrun --log-dir, Slurm's %t outputs, one "
            "file per node), or a Flight Recorder dump of every rank: the rank that is behind "
            "is the one whose text differs.",
            commands(
                "doctor explain logs/",
                "export TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE=/tmp/fr_",
            ),
        ),
        data=_data(view, []),
    )


def _progressing(view: HangView, ranks: tuple[JobProcess, ...]) -> Finding:
    moving = _moving(view, ranks) if ranks else [f"{r.label()} moved: {w}" for r, w in view.moving]
    return Finding(
        "hang.progressing",
        Severity.INFO,
        f"{len(moving)} rank(s) moved while looked at: the job is working, not hung",
        evidence=(*(group_text(g) for g in view.groups), *moving),
    )


def _idle(view: HangView) -> Finding:
    lines = [group_text(g) for g in view.groups]
    if view.moving:
        return _progressing(view, ())
    return Finding(
        "hang.stalled",
        Severity.WARN,
        f"no rank waits in a collective and none moved: {lines[0]}",
        nodes=tuple(sorted({r.node for g in view.groups for r in g.ranks if r.node})),
        evidence=tuple(lines[1:]),
        fix=Fix(
            "Every rank is stuck outside the collectives (a shared filesystem, a lock, a sleep) "
            "or computes in one long call: look at the lines above, and again in a minute."
        ),
        data=_data(view, []),
    )


CHECKS = [hang, job]
