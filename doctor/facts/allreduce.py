"""What the allreduce stage ran and saw: the plan of each run, its ranks (each one's phases and
results: doctor/facts/allreduce_rank.py), the sweep and link timings across them, and what the
ranks' own logs said. Facts only: checks/allreduce.py judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import median
from typing import TYPE_CHECKING, Any

from doctor.core.model import Finding
from doctor.facts.allreduce_rank import PHASES, RankState, reach
from doctor.facts.groups import GroupSearch, stopped
from doctor.nodes.inventory import Node

if TYPE_CHECKING:
    from doctor.facts.nccl.log import NcclLog


def default_sizes(low: int = 1 << 10, high: int = 64 << 20) -> tuple[int, ...]:
    """Powers of two from ``low`` to ``high`` bytes."""
    if low < 4 or high < low:
        raise ValueError(f"bad sweep range {low}..{high} bytes")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= 2
    return tuple(sizes)


@dataclass(frozen=True)
class Deadlines:
    """Seconds a rank may spend in each phase before the run is declared stuck."""

    launch: float = 30.0  # process start plus ``import torch``
    rendezvous: float = 15.0
    init: float = 20.0
    first_allreduce: float = 10.0
    verify: float = 10.0
    sweep: float = 60.0
    teardown: float = 10.0
    # After the first rank fails, the others get this long to report their own view.
    settle: float = 2.0

    def of(self, phase: str) -> float:
        return float(getattr(self, phase, self.teardown))

    def starting_in(self, launch: float) -> Deadlines:
        """These, for a start of ``launch`` seconds: the process group's set-up gets as much
        more than its own deadline as the start got more than its default. Every rank sets it up
        at once on the same machines, so where they were slow to start (a loaded machine, 128
        ranks on this test bed's 2 cores: 51 missed a fixed 20 s) they are slow there too."""
        more = max(0.0, launch - Deadlines.launch)
        return replace(self, launch=launch, init=self.init + more)


SWEEP_BUDGET = 3.0  # seconds a time-sized sweep may take


@dataclass(frozen=True)
class Rank:
    rank: int
    node: Node
    local_rank: int = 0


@dataclass(frozen=True)
class Plan:
    ranks: tuple[Rank, ...]
    backend: str = "gloo"
    port: int = 29500
    env: dict[str, str | None] = field(default_factory=dict)
    deadlines: Deadlines = field(default_factory=Deadlines)
    # None: sized by time (doubling until the bandwidth plateaus or ``sweep_budget`` is spent);
    # a tuple forces those sizes, each run unless the phase deadline would be overrun.
    sizes: tuple[int, ...] | None = None
    sweep_budget: float = SWEEP_BUDGET
    verify_elems: int = 1 << 16
    link_bytes: int = 4 << 20  # with forced sizes; else sized by the rate the sweep measured
    python: str = "python3"

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def master(self) -> Node:
        return self.ranks[0].node


# How each phase reads in a sentence about a rank that did not get past it.
STUCK = {
    "launch": "never started",
    "rendezvous": "never joined the rendezvous at {master}",
    "init": "did not finish process-group init ({backend})",
    "first_allreduce": "did not finish its first allreduce",
    "verify": "did not finish the verification allreduce",
    "sweep": "did not finish the size sweep",
    "teardown": "did not finish teardown",
}
# A node whose best link is slower than this fraction of the typical node's is named.
SLOW_LINK_FRACTION = 0.5
# Below this a transfer measures latency and scheduling, not the link: no node is named.
MIN_LINK_BYTES = 256 << 10
# A link timing whose ends waited for a CPU for more than this share of it is not the link's.
CPU_BOUND_SHARE = 0.5


@dataclass
class RunResult:
    """One run (as configured, or as recommended)."""

    label: str
    plan: Plan
    status: str  # passed | failed | timeout | interrupted | not_started
    ranks: list[RankState]
    seconds: float
    reason: str = ""  # for not_started: why no rank ran
    address: str | None = None  # where the rendezvous listened (rank 0's node)
    port_taken: bool = False  # not started: the rendezvous port is in use
    nccl: dict[str, Any] | None = None  # what NCCL's own log said (NCCL runs only)
    # Every rank's output read by the log diagnosis (doctor explain's scanner), set by the stage:
    # what NCCL's lines said, and the failures the lines show (None: not read).
    nccl_log: NcclLog | None = None
    log_findings: tuple[Finding, ...] | None = None

    @property
    def master(self) -> str:
        return f"{self.plan.master.name}:{self.plan.port}"

    @property
    def verified(self) -> bool:
        return bool(self.ranks) and all(
            r.verify.get("wrong") == 0 and r.verify.get("elems") for r in self.ranks
        )

    def behind(self) -> list[RankState]:
        """The ranks that got least far: the likely cause when a run did not pass."""
        stuck = [r for r in self.ranks if not r.done]
        if not stuck:
            return []
        low = min(reach(r) for r in stuck)
        last = [r for r in stuck if reach(r) == low]
        # Among equals, a rank that reported an error is the cause, else one that died (its
        # process or its node gone); the others were only slower, or stopped because of it.
        return [r for r in last if r.error] or [r for r in last if r.failed] or last

    def still_starting(self) -> list[RankState]:
        """The ranks that had neither failed nor imported torch (their process starting, then
        ``import torch``): what a launch deadline caught."""
        return [r for r in self.ranks if r.phase in ("", "launch") and not r.ready and not r.failed]

    @property
    def slow_start(self) -> bool:
        """Timed out while ranks were still starting, none failed. No rank meets the others
        before every rank has imported torch (the word to go waits for all), so such a run tried
        nothing on the network: it proved no node bad, only that a start (a node's, or the
        shared filesystem's) was slower than the launch deadline."""
        starting = self.status == "timeout" and bool(self.still_starting())
        return starting and not any(r.failed for r in self.ranks)

    @property
    def store_up(self) -> bool:
        """Whether rank 0's rendezvous store listened (rank 0 got past the rendezvous): until
        then another rank's failure to reach it is a consequence, not a cause."""
        first = self.ranks[0] if self.ranks else None
        return first is not None and reach(first) >= PHASES.index("init")

    def start_seconds(self) -> list[float]:
        """How long each rank that imported torch took to start, from the run's start."""
        return sorted(r.ready_s for r in self.ranks if r.ready_s is not None)

    def sentence(self, r: RankState) -> str:
        phase = r.failed_phase or r.phase or "launch"
        text = STUCK.get(phase, f"stopped in {phase}").format(
            master=self.master, backend=self.plan.backend
        )
        launch = self.plan.deadlines.launch
        if r.phase == "launch" and not r.failed:
            text = f"started but had not imported torch within {launch:g}s"
            if r.ready_s is not None:
                text = f"imported torch in {r.ready_s:.1f}s and waited for the others"
        elif r.gone and r.phase == "launch":
            text = "started, then went while it imported torch"
            if r.ready_s is not None:
                text = f"imported torch in {r.ready_s:.1f}s, then went while it waited"
        elif not r.phase and not r.failed and self.status == "timeout":
            text = f"never started within {launch:g}s"
        elif r.rank == 0 and r.phase == "rendezvous" and not r.failed:
            text = f"did not set up the rendezvous store at {self.master}"
        line = f"rank {r.rank} ({r.node}) {text}"
        if r.error:
            line += f": {r.error}"
        elif not r.phase and r.exit_code not in (None, 0):
            tail = r.stderr.strip().splitlines()
            line += f": exit status {r.exit_code}" + (f", {tail[-1][:300]}" if tail else "")
        return line

    def headline(self) -> str:
        if self.status == "not_started":
            return f"{self.label}: not started: {self.reason}"
        if self.status == "passed":
            n = self.plan.world_size
            return f"{self.label}: {n} rank{'s' if n != 1 else ''} verified exactly"
        culprits = self.behind()
        why = "; ".join(self.sentence(r) for r in culprits) or "a rank failed"
        return f"{self.label}: {self.status}: {why}"

    def sweep_rows(self) -> list[dict[str, Any]]:
        """Per size: the slowest rank's time, algbw and busbw (nccl-tests' definitions)."""
        n = self.plan.world_size
        by_size: dict[int, list[tuple[float, RankState]]] = {}
        for r in self.ranks:
            for row in r.sweep:
                by_size.setdefault(int(row["bytes"]), []).append((float(row["time_s"]), r))
        rows = []
        for size in sorted(by_size):
            times = by_size[size]
            if len(times) != n:
                continue  # not every rank finished this size
            time_s, slow = max(times, key=lambda t: t[0])
            algbw = size / time_s / 1e9 if time_s > 0 else 0.0
            rows.append(
                {
                    "bytes": size,
                    "time_s": time_s,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * 2 * (n - 1) / n,
                    "slowest_rank": slow.rank,
                    "slowest_node": slow.node,
                }
            )
        return rows

    def link_rows(self) -> list[dict[str, Any]]:
        """One row per directed link, from its best (fastest) measurement."""
        node_of = {r.rank: r.node for r in self.ranks}
        best: dict[tuple[int, int], dict[str, Any]] = {}
        for r in self.ranks:
            for link in r.links:
                key = (int(link["src"]), int(link["dst"]))
                if key not in best or float(link["time_s"]) < float(best[key]["time_s"]):
                    best[key] = link
        rows = []
        for (src, dst), link in best.items():
            t, size = float(link["time_s"]), int(link["bytes"])
            waited = float(link.get("waited_s") or 0.0)
            rows.append(
                {
                    "src": node_of.get(src, "?"),
                    "dst": node_of.get(dst, "?"),
                    "bytes": size,
                    "time_s": t,
                    "gbps": size / t / 1e9 if t > 0 else 0.0,
                    # Most of it spent waiting for a CPU at either end: the scheduler, not the
                    # link, was measured (a loaded machine, containers sharing one).
                    "cpu_bound": waited > CPU_BOUND_SHARE * t,
                }
            )
        return rows

    def slow_node(self) -> tuple[str, float, float] | None:
        """The node whose best link, in or out, is far slower than the others' best links.

        Returns (node, its best Gbit/s-equivalent GB/s, the typical node's). Needs three nodes:
        with two, a slow link cannot be pinned on either end. Every link counts towards the
        typical speed (a fast link that waited for a CPU was faster still), but a node is
        blamed only where its slow way's links did not mostly wait: then the machine was busy,
        not its link slow.
        """
        links = [
            row
            for row in self.link_rows()
            if row["src"] != row["dst"] and row["bytes"] >= MIN_LINK_BYTES
        ]
        score = node_scores(links)
        if len(score) < 3:
            return None
        typical = median(score.values())
        slow = [n for n in score if score[n] < SLOW_LINK_FRACTION * typical]
        if len(slow) != 1:
            return None
        shown = node_scores(links, upper=True)[slow[0]]
        if shown >= SLOW_LINK_FRACTION * typical:
            return None
        return slow[0], shown, typical

    def to_json(self) -> dict[str, Any]:
        slow = self.slow_node()
        return {
            "label": self.label,
            "status": self.status,
            "headline": self.headline(),
            "seconds": round(self.seconds, 3),
            "env": self.plan.env,
            "rendezvous": self.master,
            "verified": self.verified,
            "ranks": [
                {
                    "rank": r.rank,
                    "node": r.node,
                    "host": r.host,
                    "phase": r.phase or "not_started",
                    "completed": r.done,
                    "start_s": None if r.ready_s is None else round(r.ready_s, 3),
                    "error": r.error or None,
                    "exit_code": r.exit_code,
                    "env": r.env,
                }
                for r in self.ranks
            ],
            "sweep": self.sweep_rows(),
            # Set when the sweep stopped before its largest size to stay inside its deadline.
            "sweep_stopped": next((r.sweep_stopped for r in self.ranks if r.sweep_stopped), None),
            "links": self.link_rows(),
            "slow_node": slow[0] if slow else None,
            "nccl": self.nccl,
        }


def node_scores(links: list[dict[str, Any]], *, upper: bool = False) -> dict[str, float]:
    """Per node, its best link the slower way (a link shaped on egress only is still seen); a
    node with no timing one way has no score, not 0.

    A link that mostly waited for a CPU ran at least as fast as measured, maybe much faster:
    with ``upper`` such a link makes its way's best unknown (infinite), so the score says how
    slow the node can be shown to be, not how slow it looked.
    """
    nodes = sorted({row["src"] for row in links} | {row["dst"] for row in links})

    def best(rows: list[dict[str, Any]]) -> float:
        if upper and any(row["cpu_bound"] for row in rows):
            return math.inf
        return max(row["gbps"] for row in rows)

    score = {}
    for n in nodes:
        out = [row for row in links if row["src"] == n]
        into = [row for row in links if row["dst"] == n]
        if out and into:
            score[n] = min(best(out), best(into))
    return score


@dataclass(frozen=True)
class AllreduceFacts:
    """The stage's outcome: its runs, or why none ran."""

    backend: str
    world_size: int
    master: str  # the node of rank 0, where the rendezvous listens
    port: int
    python: str  # the nodes' interpreter the ranks ran under
    rendezvous: str  # "node1:29500 (198.18.0.1)"
    recommendation: dict[str, str] = field(default_factory=dict)  # tried "as recommended"
    runs: tuple[RunResult, ...] = ()
    skipped: str = ""  # why the stage did not run at all (one rank: nothing to reduce across)
    not_started: str = ""  # why the rendezvous could not be set up
    port_taken: bool = False  # not started because the rendezvous port is in use
    search: GroupSearch | None = None  # group testing, after a failed or slow run on every node

    @property
    def interrupted(self) -> bool:
        return any(r.status == "interrupted" for r in self.runs) or stopped(self.search)

    def section(self) -> dict[str, Any]:
        """The ``allreduce`` section of the JSON report."""
        first = self.runs[0] if self.runs else None
        return {
            "backend": self.backend,
            "world_size": self.world_size,
            "rendezvous": self.rendezvous,
            "recommendation": self.recommendation or None,
            "status": first.status if first else ("skipped" if self.skipped else "not_started"),
            "skipped": self.skipped or None,
            "verified": bool(first and first.verified),
            "runs": [r.to_json() for r in self.runs],
            "search": self.search.to_json() if self.search else None,
        }
