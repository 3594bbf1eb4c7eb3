"""The shape of a hang, from every rank's position (doctor/facts/hang/position.py), Flight Recorder
(doctor/facts/hang/flight.py) and RAS (doctor/facts/hang/ras.py): who waits where, who is elsewhere,
who called something else, who is gone, and which nodes said nothing.

A rank that enqueued a collective the device has not completed (Flight Recorder) waits in it
even when its host thread is elsewhere (NCCL's collectives are asynchronous: the host blocks
later, in ``.item()`` or a synchronize); a rank whose enqueued count is behind the others' (in
Flight Recorder or RAS) has not reached what they wait in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from doctor.core.model import NodeFailure
from doctor.facts.hang.flight import FlightView, Who, compare, who
from doctor.facts.hang.position import Position, moved, position, waiting_on
from doctor.facts.hang.ras import RasView, read_ras
from doctor.facts.hang.stacks import JobProcess, StacksFacts


@dataclass(frozen=True)
class Group:
    position: Position
    ranks: tuple[JobProcess, ...]

    @property
    def waits(self) -> bool:
        return self.position.kind in ("collective", "device")


@dataclass(frozen=True)
class Odd:
    """A rank that is not where the others wait, and what shows it."""

    process: JobProcess
    position: Position
    why: str
    child: tuple[JobProcess, Position] | None = None  # the worker it waits for, if that is it


@dataclass(frozen=True)
class Sides:
    """Ranks that called different collectives at one step: what each side called."""

    what: str  # "op", "sizes" or "call site"
    sides: dict[str, tuple[JobProcess, ...]]
    source: str  # "Flight Recorder" or "stacks"

    def minority(self) -> tuple[JobProcess, ...]:
        sizes = sorted(len(v) for v in self.sides.values())
        if len(sizes) > 1 and sizes[0] == sizes[-1]:
            return tuple(p for v in self.sides.values() for p in v)
        return min(self.sides.values(), key=len)


@dataclass(frozen=True)
class Gone:
    rank: int
    node: str | None  # where it ran, when the others say
    why: str


@dataclass(frozen=True)
class HangView:
    job: str
    positions: dict[Who, Position]  # who(rank) -> where the rank is
    groups: tuple[Group, ...]  # largest first
    odd: tuple[Odd, ...] = ()
    mismatch: Sides | None = None
    gone: tuple[Gone, ...] = ()
    silent: dict[str, NodeFailure] = field(default_factory=dict)
    blind: tuple[tuple[JobProcess, str], ...] = ()  # ranks with no stack, and why
    moving: tuple[tuple[JobProcess, str], ...] = ()  # ranks that moved while looked at
    empty: tuple[str, ...] = ()  # nodes that answered with no rank of the job
    world: int | None = None
    flight: FlightView | None = None
    ras: RasView | None = None
    live: bool = True  # looked at by the doctor (else read from text the job left)

    @property
    def ranks(self) -> tuple[JobProcess, ...]:
        """Every rank the evidence places somewhere."""
        return tuple(r for g in self.groups for r in g.ranks)

    def first_collective(self) -> bool:
        """Every placed rank waits in its process group's first collective: the ranks never
        completed one together, so none is behind: the path between them is at fault."""
        placed = [p for p in self.positions.values() if p.kind == "collective"]
        return (
            bool(placed)
            and len(placed) == len(self.positions)
            and all(p.seq is not None and p.seq <= 1 for p in placed)
        )

    @property
    def waiting(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.waits)

    def shape(self) -> str:
        """The one word for the hang, worst evidence first."""
        if self.silent:
            return "silent"
        if self.gone:
            return "gone"
        if self.mismatch:
            return "mismatch"
        if self.odd:
            return "outside"
        if len(self.waiting) == 1 and len(self.groups) == 1:
            return "symmetric"
        if self.groups:
            return "idle"
        return "none"


def _flight_position(stacked: Position, process: JobProcess, flight: FlightView) -> Position:
    pending = flight.pending.get(who(process))
    lagging = any(who(lag.process) == who(process) for lag in flight.lags)
    if pending is None or lagging or stacked.kind == "collective":
        return stacked
    seq = pending.seq if stacked.site is None else None  # a number where no stack says more
    return Position(
        "collective", pending.op, pending.site, stacked.site, "Flight Recorder", seq, pending.group
    )


def _placed(process: JobProcess, flight: FlightView) -> Position | None:
    """Where a rank is: its stack, with Flight Recorder's pending collective; without a stack
    (text), a collective it waits in or a state that says (D: uninterruptible I/O)."""
    if process.threads:
        return _flight_position(position(process), process, flight)
    if who(process) in flight.pending:
        return _flight_position(Position("unknown"), process, flight)
    state = process.last.state if process.last else ""
    if state in ("D", "T", "t", "Z"):
        doing = waiting_on(process.last.wchan if process.last else "", state) or "a zombie"
        return Position("outside", doing=f"{doing} (state {state})")
    return None


def hang_view(stacks: StacksFacts, job: str) -> HangView:
    """One job's hang (a node may run several jobs: each is judged on its own ranks)."""
    ranks = stacks.ranks(job)
    flight = compare(ranks)
    ras = next((v for n in stacks.nodes.values() if (v := read_ras(n.ras))), None)
    positions = {who(r): at for r in ranks if (at := _placed(r, flight)) is not None}
    seen = [r for r in ranks if who(r) in positions]
    by_key: dict[tuple[str, str, str, int, int, str], list[JobProcess]] = {}
    for r in seen:
        by_key.setdefault(positions[who(r)].key(), []).append(r)
    groups = sorted(
        (Group(positions[who(v[0])], tuple(v)) for v in by_key.values()),
        key=lambda g: (-len(g.ranks), not g.waits),
    )
    gone, world = _gone(stacks, job, ranks, ras)
    return HangView(
        job=job,
        positions=positions,
        groups=tuple(groups),
        odd=tuple(_odd(stacks, ranks, groups, positions, flight, ras)),
        mismatch=_mismatch(groups, flight) or _ras_mismatch(ranks, ras),
        gone=tuple(gone),
        silent=dict(stacks.failures),
        blind=tuple((r, r.stack_error or "no stack") for r in ranks if not r.threads)
        if stacks.live
        else (),
        moving=tuple((r, why) for r in ranks if (why := moved(r))),
        empty=tuple(
            n for n, s in stacks.nodes.items() if not any(p.role == "rank" for p in s.processes)
        )
        if stacks.live
        else (),
        world=world,
        flight=flight,
        ras=ras,
        live=stacks.live,
    )


def _odd(
    stacks: StacksFacts,
    ranks: list[JobProcess],
    groups: list[Group],
    positions: dict[Who, Position],
    flight: FlightView,
    ras: RasView | None,
) -> list[Odd]:
    """Ranks elsewhere while others wait in a collective, and ranks behind the others' count."""
    found: dict[tuple[str, int, int | None], Odd] = {}
    waiting = [g for g in groups if g.waits]
    if waiting:
        for group in groups:
            if group.waits:
                continue
            for r in group.ranks:
                if r.crash and r.rank is not None:
                    continue  # gone: it crashed there (_gone)
                why = f"crashed ({r.crash})" if r.crash else "outside any collective"
                found[(r.node, r.pid, r.rank)] = Odd(r, group.position, why, _child(stacks, r))
    for lag in flight.lags:
        p = lag.process
        where = positions.get(who(p), Position("unknown"))
        of = f" of process group {lag.group}" if lag.group not in ("", "0") else ""
        by = str((p.flight or {}).get("told_by") or "Flight Recorder")
        why = (
            f"enqueued up to collective #{lag.enqueued}, the others wait in #{lag.others}{of} "
            f"({by})"
        )
        _add(found, Odd(p, where, why, _child(stacks, p)))
    for behind in ras.lags if ras else []:
        held = next((r for r in ranks if r.rank == behind.rank.rank), None)
        if held is None:
            if stacks.live:
                continue
            held = _told_rank(behind.rank.rank, behind.rank.host, behind.rank.pid or 0)
        where = positions.get(who(held), Position("unknown"))
        why = (
            f"launched {behind.count} {behind.op} operations, the others up to {behind.most} "
            "(NCCL RAS)"
        )
        _add(found, Odd(held, where, why, _child(stacks, held)))
    for verdict in stacks.told:
        held = next((r for r in ranks if r.rank == verdict.rank), None)
        held = held or _told_rank(verdict.rank, verdict.node, verdict.pid)
        where = positions.get(who(held), Position("unknown"))
        _add(found, Odd(held, where, f"not in {verdict.collective} ({verdict.tool})"))
    if not found:  # nothing else names a rank: the text's one quiet rank, if it is that
        for odd in _unheard(stacks, groups):
            _add(found, odd)
    return sorted(found.values(), key=lambda o: (o.process.rank or 0, o.process.node))


def _unheard(stacks: StacksFacts, groups: list[Group]) -> list[Odd]:
    """Text only: the one rank whose output is here but says nothing of the hang, while every
    other rank timed out in one collective past the first. A rank that reached it would have
    timed out with them; one that never did printed nothing. Not at the first collective (ranks
    arrive there minutes apart, after loading: a late one is killed before its own timeout),
    and not where two ranks are quiet (the second may be a waiter killed first)."""
    if len(groups) != 1 or not groups[0].waits or len(stacks.quiet) != 1:
        return []
    (group,) = groups
    if len(group.ranks) < 2 or group.position.seq is None or group.position.seq <= 1:
        return []
    ((rank, node),) = stacks.quiet
    why = "its output is here and holds no timeout: most likely it never reached the collective"
    return [Odd(_told_rank(rank, node, 0), Position("unknown"), why)]


def _told_rank(rank: int, node: str, pid: int) -> JobProcess:
    """A rank only a tool's verdict names (its own text is not here)."""
    return JobProcess(node=node, pid=pid, role="rank", argv=(), env={"RANK": str(rank)})


def _add(found: dict[tuple[str, int, int | None], Odd], odd: Odd) -> None:
    """One Odd per rank, its reasons joined."""
    key = (odd.process.node, odd.process.pid, odd.process.rank)
    if odd.process.rank is not None:  # text: one rank, whether a node and pid were told or not
        key = next((k for k in found if k[2] == odd.process.rank), key)
    known = found.get(key)
    found[key] = replace(known, why=f"{known.why}; {odd.why}") if known else odd


def _child(stacks: StacksFacts, rank: JobProcess) -> tuple[JobProcess, Position] | None:
    """The worker a rank waits for (a DataLoader worker blocked somewhere), if it has one."""
    kids = [c for c in stacks.children(rank) if c.threads]
    if not kids:
        return None
    stuck = [(c, position(c)) for c in kids]
    return next(((c, p) for c, p in stuck if p.site and p.doing), stuck[0])


def _mismatch(groups: list[Group], flight: FlightView) -> Sides | None:
    if flight.mismatches:
        m = flight.mismatches[0]
        return Sides(m.what, {k: tuple(v) for k, v in m.sides.items()}, "Flight Recorder")
    # Stacks name the call site; a collective known only by its number (text, Flight
    # Recorder) is compared by the number, above.
    calls = [g for g in groups if g.position.kind == "collective" and g.position.site]
    if len(calls) < 2:
        return None
    ops = {g.position.op for g in calls}
    sides = {
        f"{g.position.op} called at {g.position.site.where() if g.position.site else '?'}": g.ranks
        for g in calls
    }
    return Sides("op" if len(ops) > 1 else "call site", sides, "stacks")


def _ras_mismatch(ranks: list[JobProcess], ras: RasView | None) -> Sides | None:
    """RAS alone: ranks behind in one collective and ahead in another called different ones
    (a broadcast on one side, an allreduce on the other)."""
    behind: dict[str, set[int]] = {}
    most: dict[str, int] = {}
    for lag in ras.lags if ras else []:
        behind.setdefault(lag.op, set()).add(lag.rank.rank)
        most[lag.op] = lag.most
    if len(behind) < 2 or len({frozenset(v) for v in behind.values()}) < 2:
        return None
    numbers = {r.rank for r in ranks}
    sides = {
        f"{op} #{most[op]} (NCCL RAS)": tuple(r for r in ranks if r.rank in numbers - late)
        for op, late in behind.items()
    }
    sides = {k: v for k, v in sides.items() if v}
    return Sides("op", sides, "NCCL RAS") if len(sides) > 1 else None


def _gone(
    stacks: StacksFacts, job: str, ranks: list[JobProcess], ras: RasView | None
) -> tuple[list[Gone], int | None]:
    """Ranks the job has (its world size) that no answering node holds, RAS's lost ranks, and
    (text) ranks their launcher saw killed or crash whose own text shows no wait; a rank on a
    node that said nothing is that node's silence, not a rank gone."""
    sizes = [w for r in ranks if (w := r.world_size) is not None]
    world = max(sizes) if sizes else None
    if not stacks.live:  # a rank the text does not show is not thereby gone
        world = None
    numbers = {r.rank for r in ranks if r.rank is not None}
    node_of_group = {}
    local = Counter(r.number("LOCAL_WORLD_SIZE") for r in ranks)
    per_node = local.most_common(1)[0][0] if local and len(local) == 1 else None
    for r in ranks:
        group = r.number("GROUP_RANK", "ROLE_RANK")
        if group is not None:
            node_of_group[group] = r.node
    out: dict[int, Gone] = {}
    # A group of ranks no answering node holds ran on the one node that holds none, if one.
    bare = [n for n, s in stacks.nodes.items() if not any(p.job() == job for p in s.processes)]
    for number in sorted(set(range(world or 0)) - numbers):
        node = node_of_group.get(number // per_node) if per_node else None
        if node is None and len(bare) == 1 and not stacks.failures:
            node = bare[0]
        if node is None and stacks.failures:
            continue  # most likely on the node that did not answer
        out[number] = Gone(number, node, f"no process holds rank {number} of {world}")
    for lost in ras.missing if ras else []:
        if lost.rank in numbers:
            continue
        host = lost.host if lost.host not in ("", "?") else ""
        where = f"process {lost.pid} on {host}" if lost.pid and host else host
        # RAS names a node by the address its ranks bootstrapped on (a loopback one: the node
        # the look ran on, when it ran on one only).
        here = lost.host.startswith("127.") and len(stacks.nodes) == 1
        holder = next((n for n, s in stacks.nodes.items() if lost.host in s.addresses), None)
        known = out.get(lost.rank)
        node = (
            (known.node if known else None)
            or holder
            or (next(iter(stacks.nodes)) if here else None)
        )
        why = f"{known.why}; " if known else ""
        told = f" ({where})" if where else ""
        out[lost.rank] = Gone(lost.rank, node, f"{why}NCCL RAS lost it{told}")
    waited = {r.rank for r in ranks if r.flight or position(r).kind == "collective"}
    said = {number: (node, why) for number, node, why in stacks.exited}
    for r in ranks:  # (text) a faulthandler dump of a crash: the rank died where it shows
        if r.crash and r.rank is not None:
            node, why = said.get(r.rank, (r.node, ""))
            crashed = f"crashed ({r.crash}) at {position(r).describe()}"
            said[r.rank] = (node or r.node, f"{why}; {crashed}" if why else crashed)
    for number, (node, why) in said.items():
        if number in waited:
            continue  # killed after it timed out in a collective: a waiter, not the cause
        known = out.get(number)
        before = f"{known.why}; " if known else ""
        out[number] = Gone(number, (known.node if known else None) or node or None, before + why)
    return list(out.values()), world
