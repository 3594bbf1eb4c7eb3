"""Which pairs the cross-node stages test: all up to a size, a fixed fan-in sample beyond."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.stages.pairs import RANDOM_PEERS, Sampling, choose

NODES = [f"n{i:03d}" for i in range(200)]


def test_all_pairs_up_to_the_threshold_then_sampled() -> None:
    small = choose(NODES[:16], Sampling.auto, 16, seed=1)
    assert small.mode == "full" and small.seed is None
    assert small.pairs == small.total == 16 * 15
    big = choose(NODES[:17], Sampling.auto, 16, seed=1)
    assert big.mode == "sampled" and big.seed == 1
    assert big.pairs == 17 * (2 + RANDOM_PEERS) < big.total
    assert choose(NODES[:5], Sampling.full, 2, seed=1).pairs == 20


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=10, max_value=200), seed=st.integers(min_value=0, max_value=2**31))
def test_every_node_is_a_source_and_a_target_the_same_few_times(n: int, seed: int) -> None:
    nodes = NODES[:n]
    coverage = choose(nodes, Sampling.sampled, 4, seed)
    into = Counter(t for targets in coverage.peers.values() for t in targets)
    for i, node in enumerate(nodes):
        targets = coverage.peers[node]
        assert node not in targets and len(set(targets)) == len(targets)
        # The ring both ways: a node cut off from its neighbours is always seen.
        assert {nodes[(i + 1) % n], nodes[i - 1]} <= set(targets)
        # Fixed fan-out and fan-in: no sshd or listener gets more than 2 + k at once.
        assert len(targets) == 2 + RANDOM_PEERS
        assert into[node] == 2 + RANDOM_PEERS


def test_the_seed_reproduces_the_sample_and_the_report_lists_it() -> None:
    one = choose(NODES[:40], Sampling.auto, 16, seed=7)
    assert one == choose(NODES[:40], Sampling.auto, 16, seed=7)
    assert one.peers != choose(NODES[:40], Sampling.auto, 16, seed=8).peers
    doc = one.to_json()
    assert (doc["mode"], doc["seed"], doc["pairs_tested"], doc["pairs_total"]) == (
        "sampled",
        7,
        200,
        1560,
    )
    assert ["n000", "n001"] in doc["pairs"] and len(doc["pairs"]) == 200


def test_tiny_clusters_sampled_on_request_still_work() -> None:
    for n in range(2, 10):
        coverage = choose(NODES[:n], Sampling.sampled, 1, seed=3)
        into = Counter(t for targets in coverage.peers.values() for t in targets)
        assert all(node not in targets for node, targets in coverage.peers.items())
        assert max(into.values()) <= 2 + RANDOM_PEERS
        assert coverage.pairs <= coverage.total
