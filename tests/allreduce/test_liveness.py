"""Judging a rank gone by its heartbeats against the others': pure, on the controller's clock."""

from __future__ import annotations

from doctor.stages.allreduce.liveness import SILENT_BEATS, Pulse


def beating(pulse: Pulse, ranks: list[int], start: float, end: float, step: float = 1.0) -> None:
    """Each of ``ranks`` beats every ``step`` seconds from ``start`` up to ``end``."""
    at = start
    while at <= end:
        for rank in ranks:
            pulse.hear(rank, at, beat=True)
        at += step


def three_ranks() -> Pulse:
    pulse = Pulse()
    for rank in range(3):
        pulse.started(rank, 0.0)
        pulse.hear(rank, 0.2, beat=False)  # its launch line
    return pulse


def test_a_rank_whose_beats_stopped_while_the_others_went_on_is_gone() -> None:
    pulse = three_ranks()
    beating(pulse, [0, 1, 2], 0.3, 2.3)
    beating(pulse, [0, 1], 3.3, 30.3)  # rank 2's node died after 2.3 s
    assert pulse.gone(2.3 + SILENT_BEATS - 0.5, [0, 1, 2]) == []  # not yet
    assert pulse.gone(2.3 + SILENT_BEATS + 0.1, [0, 1, 2]) == [2]
    assert pulse.gone(30.3, [0, 1]) == []  # only the ranks still watched are judged


def test_a_rank_slow_to_import_that_still_beats_is_not_gone() -> None:
    pulse = three_ranks()
    beating(pulse, [0, 1, 2], 0.3, 29.3)  # rank 2 says nothing else: it imports torch
    assert pulse.gone(30.0, [0, 1, 2]) == []


def test_a_rank_silent_while_every_rank_was_silent_is_not_gone() -> None:
    # The controller (or the whole machine) stalled: nobody's lines arrive, none is judged.
    pulse = three_ranks()
    beating(pulse, [0, 1, 2], 0.3, 2.3)
    assert pulse.gone(40.0, [0, 1, 2]) == []


def test_the_burst_after_a_stall_does_not_condemn_the_rank_read_last() -> None:
    # After 20 s stalled, ranks 0 and 1's buffered beats are read at once; rank 2's pipe a moment
    # later. In that moment rank 2 looks silent among others' beats, which all came in one burst.
    pulse = three_ranks()
    beating(pulse, [0, 1, 2], 0.3, 2.3)
    beating(pulse, [0, 1], 22.3, 22.3 + 0.01 * 19, step=0.01)
    assert pulse.gone(22.5, [0, 1, 2]) == []
    beating(pulse, [2], 22.6, 22.6 + 0.01 * 19, step=0.01)
    beating(pulse, [0, 1, 2], 23.6, 30.6)
    assert pulse.gone(30.7, [0, 1, 2]) == []


def test_beats_that_come_back_clear_a_rank() -> None:
    pulse = three_ranks()
    beating(pulse, [0, 1, 2], 0.3, 2.3)
    beating(pulse, [0, 1], 3.3, 2.3 + SILENT_BEATS - 1)
    pulse.hear(2, 2.3 + SILENT_BEATS - 0.5, beat=True)  # late, not gone
    beating(pulse, [0, 1], 2.3 + SILENT_BEATS, 2.3 + 2 * SILENT_BEATS - 2)
    assert pulse.gone(2.3 + 2 * SILENT_BEATS - 1.5, [0, 1, 2]) == []


def test_a_rank_never_heard_from_gets_twice_as_long_from_its_start() -> None:
    pulse = Pulse()
    for rank in range(3):
        pulse.started(rank, 0.0)
    beating(pulse, [0, 1], 0.5, 40.5)
    assert pulse.gone(SILENT_BEATS + 1, [0, 1, 2]) == []
    assert pulse.gone(2 * SILENT_BEATS + 0.1, [0, 1, 2]) == [2]


def test_a_line_that_is_not_a_beat_also_says_the_rank_is_there() -> None:
    pulse = three_ranks()
    beating(pulse, [0, 1], 0.3, 30.3)
    for at in range(1, 30):
        pulse.hear(2, float(at), beat=False)  # a rank whose pulse could not start
    assert pulse.gone(30.3, [0, 1, 2]) == []
