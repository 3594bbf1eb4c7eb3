"""Group testing (doctor/stages/allreduce/search.py) against a fake fleet: a "run a round"
function whose bad nodes fail every group they are in, whose slow nodes hold a group to 10
Mbit/s, whose bad pairs fail a group that holds both. No cluster: the decisions alone."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.stages.allreduce.search import Trial, chunks, default_max_bad, gap, search

TEN_MBIT = 10e6 / 8 / 1e9  # GB/s


def names(n: int) -> list[str]:
    return [f"node{i}" for i in range(1, n + 1)]


class Fleet:
    """Runs a round of groups the way the allreduce stage would, from the faults it was given.

    A healthy group's speed falls with its size (on a machine whose network is its CPUs, more
    ranks share them) and moves with the machine's load, several times over (as the 8-node test
    bed's did); a group with a slow node runs at 10 Mbit/s."""

    def __init__(
        self,
        *,
        bad: Sequence[str] = (),
        slow: Sequence[str] = (),
        pairs: Sequence[tuple[str, str]] = (),
        spread: float = 7.0,
        seed: int = 0,
        unknown_once: Sequence[str] = (),
    ) -> None:
        self.bad, self.slow, self.pairs = set(bad), set(slow), list(pairs)
        self.spread, self.random = spread, random.Random(seed)
        self.unknown_once = set(unknown_once)  # a group holding one of these proves nothing once
        self.rounds: list[list[tuple[str, ...]]] = []

    def __call__(self, groups: list[tuple[str, ...]]) -> list[Trial]:
        used = [n for g in groups for n in g]
        assert len(used) == len(set(used)), f"a round's groups overlap: {groups}"
        assert all(len(g) >= 2 for g in groups), f"a group of one cannot allreduce: {groups}"
        self.rounds.append(groups)
        return [self.trial(g) for g in groups]

    def trial(self, group: tuple[str, ...]) -> Trial:
        held = self.unknown_once & set(group)
        if held:
            self.unknown_once -= held
            return Trial(None, headline="most ranks were still starting")
        if self.bad & set(group) or any(a in group and b in group for a, b in self.pairs):
            return Trial(False, headline="rank 1 never started")
        if self.slow & set(group):
            return Trial(True, TEN_MBIT * (1 + self.random.random() / 2))
        # Healthy groups of one round spread over up to ``spread`` times (6.4x measured).
        healthy = 2.0 / (1 + len(group) / 16)
        return Trial(True, healthy / self.spread ** self.random.random())

    @property
    def tests(self) -> int:
        return sum(len(r) for r in self.rounds)


def log2(n: int) -> int:
    return math.ceil(math.log2(n))


def test_chunks_are_contiguous_and_even() -> None:
    nodes = tuple(names(10))
    assert [len(c) for c in chunks(nodes, 4)] == [3, 3, 2, 2]
    assert sum(chunks(nodes, 4), ()) == nodes
    assert chunks(("a",), 2) == [("a",)]


def test_the_slow_are_below_the_widest_gap_when_it_is_wide() -> None:
    # One round of the 8-node test bed, in Mbit/s: three healthy pairs and one with node6, whose
    # link runs at 10 Mbit/s. The healthy ones spread 6.4x, with no gap of 10x between them.
    assert gap([4847.4, 756.2, 7.4, 3259.4]) == 756.2
    assert gap([4847.4, 756.2, 3259.4]) is None
    assert gap([1.0]) is None and gap([]) is None
    assert gap([0.0, 5.0]) == 5.0


def test_one_bad_node_of_64_is_named_alone_in_log_rounds() -> None:
    fleet = Fleet(bad=["node37"])
    found = search(names(64), fleet)
    assert found.bad_nodes == ("node37",) and found.bad_pairs == () and found.unresolved == ""
    # Quarters (4 tests), then halves of the bad part down to one node with a known-good one.
    assert found.rounds == 5 == len(fleet.rounds)
    assert found.rounds <= log2(64)
    assert len(found.tests) == fleet.tests == 4 + 2 * 4
    (confirm,) = [t for t in found.tests if t.role == "confirm" and t.outcome == "fail"]
    assert confirm.partner is not None and confirm.partner != "node37"
    assert set(confirm.nodes) == {"node37", confirm.partner}
    assert found.named == ("node37",)
    assert found.summary() == "group testing of 64 nodes: 5 rounds, 12 tests, 0.0s"


def test_a_10mbit_node_of_64_is_named_alone_against_noisy_groups() -> None:
    fleet = Fleet(slow=["node5"], seed=3)
    found = search(names(64), fleet, mode="slow")
    assert found.bad_nodes == ("node5",) and found.unresolved == ""
    slow = [t for t in found.tests if t.outcome == "slow"]
    assert slow and all("node5" in t.nodes for t in slow)
    # Every round after the first ran a control group of known-good nodes beside the suspects.
    controls = [t for t in found.tests if t.role == "control"]
    assert {t.round for t in controls} == set(range(2, found.rounds + 1))
    assert all(t.outcome == "pass" for t in controls)
    last = [t for t in found.tests if t.round == found.rounds and "node5" in t.nodes]
    (confirm,) = last
    assert confirm.role == "confirm" and confirm.reference_gbps is not None
    assert confirm.busbw_gbps is not None and confirm.busbw_gbps < confirm.reference_gbps / 10


def test_a_bad_link_is_named_as_the_pair_not_as_either_node() -> None:
    # node3 and node14 fail together, each passes with anyone else: every part of the first
    # round passes, so the parts are tested two by two, then halves across, down to the pair.
    fleet = Fleet(pairs=[("node3", "node14")])
    found = search(names(16), fleet)
    assert found.bad_pairs == (("node3", "node14"),)
    assert found.bad_nodes == () and found.named == ("node3", "node14")
    assert found.rounds <= 2 * log2(16) + 2


def test_a_bad_link_inside_one_part_is_found_too() -> None:
    fleet = Fleet(pairs=[("node1", "node2")])
    found = search(names(8), fleet)
    assert found.bad_pairs == (("node1", "node2"),) and found.bad_nodes == ()


def test_every_group_failing_is_a_shared_cause_after_one_round() -> None:
    fleet = Fleet(bad=names(16))
    found = search(names(16), fleet)
    assert found.rounds == 1 and found.bad_nodes == ()
    assert "every group failed alike" in found.unresolved
    assert set(found.suspects) == set(names(16))


def test_more_bad_nodes_than_the_limit_stop_the_search() -> None:
    fleet = Fleet(bad=["node1", "node9", "node17"])
    found = search(names(32), fleet, max_bad=2)
    assert found.rounds == 1 and found.bad_nodes == ()
    assert "more than 2 of 32 nodes are at fault" in found.unresolved


def test_a_failure_that_does_not_come_back_names_nobody() -> None:
    found = search(names(8), Fleet())
    assert found.named == () and found.suspects == ()
    assert "no pair of its parts did again" in found.unresolved
    # Quarters, then every pair of quarters: three rounds of two disjoint unions.
    assert found.rounds == 4 and len(found.tests) == 4 + 6


def test_a_slowness_that_does_not_come_back_stops_after_one_round() -> None:
    found = search(names(16), Fleet(), mode="slow")
    assert found.rounds == 1 and found.named == ()
    assert "ran slow together, no part of it alone" in found.unresolved
    assert all(t.outcome == "pass" for t in found.tests)


def test_a_group_that_proved_nothing_is_run_again() -> None:
    fleet = Fleet(bad=["node6"], unknown_once=["node6"])
    found = search(names(8), fleet)
    assert found.bad_nodes == ("node6",)
    assert next(t.outcome for t in found.tests if "node6" in t.nodes) == "unknown"


def test_a_group_that_proves_nothing_twice_leaves_its_nodes_suspect() -> None:
    class Stuck(Fleet):
        def trial(self, group: tuple[str, ...]) -> Trial:
            return Trial(None) if "node2" in group else super().trial(group)

    found = search(names(8), Stuck())
    assert found.named == () and found.suspects == ("node1", "node2")
    assert "node1,node2 proved nothing twice" in found.unresolved


def test_three_nodes_a_bad_one_is_confirmed_with_the_pair_that_passed() -> None:
    found = search(names(3), Fleet(bad=["node3"]))
    assert found.bad_nodes == ("node3",) and found.rounds == 2
    assert [(t.nodes, t.outcome) for t in found.tests] == [
        (("node1", "node2"), "pass"),
        (("node1", "node3"), "fail"),
    ]


def test_two_nodes_have_no_node_known_good() -> None:
    found = search(names(2), Fleet(bad=["node2"]))
    assert found.rounds == 0 and found.named == ()
    assert found.suspects == ("node1", "node2")
    assert "no node known good" in found.unresolved


def test_the_report_carries_every_group() -> None:
    found = search(names(8), Fleet(bad=["node4"]))
    section = found.to_json()
    assert section["rounds"] == found.rounds and section["tests"] == len(found.tests)
    assert section["bad_nodes"] == ["node4"]
    assert [g["round"] for g in section["groups"]] == sorted(g["round"] for g in section["groups"])
    assert all("node4" in t.nodes for t in found.involving("node4"))
    assert any("round 1, split node3,node4: fail" in t.line() for t in found.tests)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(4, 128),
    picks=st.lists(st.integers(0, 127), min_size=1, max_size=3, unique=True),
    mode=st.sampled_from(["fail", "slow"]),
    seed=st.integers(0, 1000),
)
def test_k_bad_nodes_are_named_exactly_in_k_log_n_tests(
    n: int, picks: list[int], mode: str, seed: int
) -> None:
    nodes = names(n)
    # As many as the search promises: fewer than its first round's parts (one part passes and
    # gives nodes known good) and no more than its limit.
    k = min(len(picks), max(2, min(4, n // 2)) - 1, default_max_bad(n))
    bad = sorted({nodes[p % n] for p in picks[:k]})
    fleet = Fleet(bad=bad, seed=seed) if mode == "fail" else Fleet(slow=bad, seed=seed)
    found = search(nodes, fleet, mode=mode)
    assert set(found.bad_nodes) == set(bad), found.unresolved
    assert found.bad_pairs == () and found.suspects == () and found.unresolved == ""
    controls = sum(t.role == "control" for t in found.tests)
    assert len(found.tests) - controls <= 4 + 2 * len(bad) * log2(n)
    assert found.rounds <= log2(n) + 2
