"""Group testing over allreduces: the few nodes (or the pair of nodes) that make the allreduce
across every node fail, hang or run slow, found in rounds that grow with log N, not N.

Pure: ``search`` is handed a function that runs one round's groups at once (disjoint sets of
nodes, each a small allreduce) and says how each went; it decides what to test next. The first
round splits the nodes in four (halves of halves); a part that is positive is split in halves in
the next round, down to single nodes, and a single node is confirmed by an allreduce with a node
already known good, so no node is named on the word of a group alone. When every part of a group
that failed passes on its own, the fault lies between parts: they are tested two by two
(``cross``), down to the pair of nodes that fail together. Each round's tests run on disjoint
nodes, so k bad nodes among N take about log2 N rounds and 2k log2 N tests.

A slow search (the allreduce across every node passed, with some links far below the others)
sorts the speeds of a round's groups of about one size and looks for the widest gap between two
neighbours: the groups below it are slow when it is at least MIN_GAP wide. Healthy groups on a
loaded machine spread over several times (their tests take milliseconds, a scheduler's stall as
long), but with no gap that wide between them; a 10 Mbit/s link runs at a hundredth. Once some
nodes are known good, a control group of them runs beside the suspects in every round, so a
round has healthy groups to hold its suspects to even when every suspect is slow.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median

from doctor.facts.groups import GroupSearch, GroupTest

# Groups below a gap this wide in their round's speeds are slow. On the 8-node test bed under
# load, healthy groups of one round spread up to 6.4x (4.3x between neighbours); a group with a
# 10 Mbit/s link ran 100x below the slowest healthy one (docs/scale.md).
MIN_GAP = 10.0
FIRST_PARTS = 4  # halves of halves: two levels of splitting in the first round
RETRIES = 1  # a group that proved nothing (ranks still starting) is run once more


@dataclass(frozen=True)
class Trial:
    """How one group's allreduce went, as the runner saw it."""

    passed: bool | None  # None: it proved nothing either way (its ranks were still starting)
    busbw_gbps: float | None = None
    seconds: float = 0.0
    headline: str = ""


RunRound = Callable[[list[tuple[str, ...]]], Sequence[Trial]]


class Stopped(Exception):
    """Raised by a round's runner to end the search where it is (Ctrl-C); its text says why."""


def default_max_bad(n: int) -> int:
    """Past this many bad nodes the cause is shared (a setting, a switch), not a few nodes."""
    return max(2, n // 8)


def chunks(nodes: tuple[str, ...], parts: int) -> list[tuple[str, ...]]:
    """``nodes`` in ``parts`` contiguous runs, as even as can be: neighbours in the inventory
    most often share a rack or a switch, so what they share stays in one part."""
    parts = max(1, min(parts, len(nodes)))
    size, extra = divmod(len(nodes), parts)
    out, at = [], 0
    for i in range(parts):
        n = size + (i < extra)
        out.append(nodes[at : at + n])
        at += n
    return out


@dataclass(eq=False)
class _Family:
    """The tests one positive group was split into, or the pairs of parts tested across:
    decided once every one of them is."""

    kind: str  # split | cross
    whole: tuple[str, ...]
    parts: list[tuple[str, ...]] = field(default_factory=list)
    open: int = 0
    positive: bool = False
    unresolved: bool = False


@dataclass(eq=False)
class _Test:
    subject: tuple[str, ...]  # the nodes under test (a confirmation adds its partner)
    role: str
    family: _Family | None
    sides: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # cross: the two parts
    partner: str | None = None
    tries: int = 0

    def nodes(self, order: dict[str, int]) -> tuple[str, ...]:
        both = (*self.subject, self.partner) if self.partner else self.subject
        return tuple(sorted(both, key=order.__getitem__))


class _Search:
    def __init__(self, nodes: Sequence[str], mode: str, max_bad: int) -> None:
        self.order = {n: i for i, n in enumerate(nodes)}
        self.mode, self.max_bad = mode, max_bad
        self.good: set[str] = set()
        self.bad: list[str] = []
        self.pairs: list[tuple[str, str]] = []
        self.suspects: set[str] = set()
        self.queue: list[_Test] = []
        self.log: list[GroupTest] = []
        self.reasons: list[str] = []
        self.rounds = 0
        self.stopped = False

    # -- what to test ------------------------------------------------------------------------
    def split(self, group: tuple[str, ...], parts: int) -> None:
        family = _Family("split", group, chunks(group, parts))
        for part in family.parts:
            self._add(_Test(part, "confirm" if len(part) == 1 else "split", family))

    def cross(
        self, family: _Family, sides: Iterable[tuple[tuple[str, ...], tuple[str, ...]]]
    ) -> None:
        for a, b in sides:
            self._add(_Test(self._sorted((*a, *b)), "cross", family, sides=(a, b)))

    def _add(self, test: _Test) -> None:
        if test.family is not None:
            test.family.open += 1
        self.queue.append(test)

    def _sorted(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=self.order.__getitem__))

    def pick(self) -> list[_Test]:
        """This round's tests: disjoint, in the order queued; a confirmation gets a node known
        good that no other test of the round uses (it waits a round when none is free)."""
        used: set[str] = set()
        chosen, waiting = [], []
        for test in self.queue:
            if used & set(test.subject):
                waiting.append(test)
                continue
            if test.role == "confirm":
                free = [g for g in self._sorted(self.good) if g not in used]
                if not free:
                    waiting.append(test)
                    continue
                test.partner = free[0]
            used.update(test.nodes(self.order))
            chosen.append(test)
        self.queue = waiting
        if chosen and self.mode == "slow":
            free = [g for g in self._sorted(self.good) if g not in used]
            size = min(len(free), max(2, math.ceil(max(len(t.subject) for t in chosen) / 2)))
            if size >= 2:
                chosen.append(_Test(tuple(free[:size]), "control", None))
        return chosen

    # -- what a round showed -----------------------------------------------------------------
    def outcomes(
        self, tests: list[_Test], trials: Sequence[Trial]
    ) -> list[tuple[str, float | None]]:
        """Each test's outcome, and (slow searches) the healthy speed it was held to."""
        out: list[tuple[str, float | None]] = []
        for test, trial in zip(tests, trials, strict=True):
            if trial.passed is None:
                out.append(("unknown", None))
            elif not trial.passed:
                out.append(("fail", None))
            elif self.mode != "slow" or trial.busbw_gbps is None:
                out.append(("pass", None))
            else:
                # Groups of about its size or larger: a much smaller one runs faster when the
                # network is the machine's CPUs, and would make a healthy group look slow.
                size = len(test.nodes(self.order))
                peers = [
                    t.busbw_gbps
                    for u, t in zip(tests, trials, strict=True)
                    if t.passed and t.busbw_gbps is not None
                    and 2 * len(u.nodes(self.order)) >= size
                ]  # fmt: skip
                cut = gap(peers)
                healthy = median([v for v in peers if cut is None or v >= cut])
                slow = cut is not None and trial.busbw_gbps < cut
                out.append(("slow" if slow else "pass", healthy))
        return out

    def learn(self, test: _Test, outcome: str) -> None:
        family = test.family
        if test.role == "control" or family is None:
            return
        if outcome == "unknown" and test.tries < RETRIES:
            test.tries += 1
            test.partner = None
            self.queue.append(test)
            return
        family.open -= 1
        if outcome == "unknown":
            family.unresolved = True
            self.suspects.update(test.subject)
            self.reasons.append(f"{','.join(test.subject)} proved nothing twice (ranks starting)")
        elif outcome == "pass":
            self.good.update(test.nodes(self.order))
        else:
            family.positive = True
            if test.role == "confirm":
                self.bad.append(test.subject[0])  # its partner is known good
            elif test.role == "split":
                self.split(test.subject, 2)
            elif test.sides is not None:
                a, b = test.sides
                if len(a) == 1 and len(b) == 1:
                    self.pairs.append((a[0], b[0]))
                else:
                    across = _Family("cross", test.subject)
                    self.cross(across, ((x, y) for x in chunks(a, 2) for y in chunks(b, 2)))
        if family.open == 0:
            self.close(family)

    def close(self, family: _Family) -> None:
        """Every test of a family is decided: a group that failed whose parts all passed."""
        if family.positive or family.unresolved:
            return
        whole = ",".join(family.whole) if len(family.whole) <= 4 else f"{len(family.whole)} nodes"
        if family.kind == "split" and self.mode == "fail":
            parts = family.parts
            pairs = [
                (parts[i], parts[j]) for i in range(len(parts)) for j in range(i + 1, len(parts))
            ]
            self.cross(_Family("cross", family.whole), pairs)
        elif family.kind == "split":
            self.reasons.append(f"{whole} ran slow together, no part of it alone")
        else:
            self.reasons.append(f"{whole} failed together, no pair of its parts did again")

    def widespread(self, tests: list[_Test], outcomes: list[str]) -> bool:
        """Whether the faults are too many to be a few nodes': every group of the round failed
        with no node known good, or more groups are positive than ``max_bad`` (disjoint
        groups that are positive each hold a fault of their own)."""
        tested = [(t, o) for t, o in zip(tests, outcomes, strict=True) if t.role != "control"]
        # Positive groups not yet down to a node or a pair (those are counted as named).
        unnamed = [
            t
            for t, o in tested
            if o in ("fail", "slow") and (t.role == "split" or len(t.subject) > 2)
            and t.role != "confirm"
        ]  # fmt: skip
        if not self.good and all(o in ("fail", "slow") for _, o in tested):
            why = "every group failed alike, none passed"
        elif len(unnamed) + len(self.bad) + len(self.pairs) > self.max_bad:
            why = f"more than {self.max_bad} of {len(self.order)} nodes are at fault"
        else:
            return False
        self.reasons.append(f"{why}: the cause is shared (a setting, a switch), not a few nodes")
        return True

    def result(self, started: float, now: float) -> GroupSearch:
        for test in self.queue:  # left when the search stopped short
            self.suspects.update(test.subject)
        suspects = self.suspects - self.good - set(self.bad)
        return GroupSearch(
            mode=self.mode,
            nodes=len(self.order),
            tests=tuple(self.log),
            rounds=self.rounds,
            seconds=now - started,
            bad_nodes=self._sorted(self.bad),
            bad_pairs=tuple(self.pairs),
            suspects=self._sorted(suspects),
            unresolved="; ".join(dict.fromkeys(self.reasons)),
            interrupted=self.stopped,
        )


def gap(speeds: Sequence[float]) -> float | None:
    """The speed above the widest gap between neighbours (sorted), when that gap is at least
    MIN_GAP wide: what is below it is slow. None: no such gap, every group alike."""
    ordered = sorted(speeds)
    widest, cut = 0.0, None
    for low, high in itertools.pairwise(ordered):
        ratio = high / low if low > 0 else math.inf
        if ratio > widest:
            widest, cut = ratio, high
    return cut if widest >= MIN_GAP else None


def max_rounds(n: int) -> int:
    return 2 * math.ceil(math.log2(max(2, n))) + 8


def search(
    nodes: Sequence[str],
    run_round: RunRound,
    *,
    mode: str = "fail",
    max_bad: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> GroupSearch:
    """Find what makes the allreduce across ``nodes`` (known positive) fail or run slow.

    ``run_round`` runs the groups it is given at once and returns one Trial per group, in order.
    """
    started = clock()
    state = _Search(nodes, mode, default_max_bad(len(nodes)) if max_bad is None else max_bad)
    state.split(tuple(nodes), max(2, min(FIRST_PARTS, len(nodes) // 2)))
    while state.queue and state.rounds < max_rounds(len(nodes)):
        tests = state.pick()
        if not tests:
            state.reasons.append("no node known good to confirm the suspects against")
            break
        try:
            trials = run_round([t.nodes(state.order) for t in tests])
        except Stopped as stop:
            state.queue[:0] = [t for t in tests if t.role != "control"]
            state.reasons.append(str(stop))
            state.stopped = True
            break
        state.rounds += 1
        outcomes = state.outcomes(tests, trials)
        for test, trial, (outcome, ref) in zip(tests, trials, outcomes, strict=True):
            state.log.append(
                GroupTest(
                    round=state.rounds,
                    nodes=test.nodes(state.order),
                    role=test.role,
                    outcome=outcome,
                    seconds=trial.seconds,
                    busbw_gbps=trial.busbw_gbps,
                    reference_gbps=ref,
                    headline=trial.headline,
                    partner=test.partner,
                )
            )
        for test, (outcome, _) in zip(tests, outcomes, strict=True):
            state.learn(test, outcome)
        if state.widespread(tests, [o for o, _ in outcomes]):
            break
    else:
        if state.queue:
            state.reasons.append(f"stopped after {state.rounds} rounds")
    return state.result(started, clock())
