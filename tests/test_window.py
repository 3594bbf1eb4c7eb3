"""The congestion window that sizes agent starts and mesh logins (doctor/stages/window.py)."""

from __future__ import annotations

import threading
import time

from doctor.stages.window import FLOOR, START, Window


def test_the_window_opens_while_logins_stay_fast_up_to_the_budget() -> None:
    window = Window(32)
    assert window.size == START
    for _ in range(40):
        window.ended(time.monotonic(), 0.4)
    assert window.size == 32


def test_a_slow_login_halves_it_once_per_window_and_growth_turns_additive() -> None:
    window = Window(32)
    for _ in range(12):
        window.ended(time.monotonic(), 0.4)
    assert window.size == 16
    before = time.monotonic()
    window.ended(before, 3.0)  # 3 s against 0.4 s: congestion
    assert window.size == 8
    # Logins handed out before that cut, judged under the old size, do not cut again.
    window.ended(before - 1, 5.0)
    assert window.size == 8
    window.ended(time.monotonic(), None)  # handed out after the cut, timed out: cut again
    assert window.size == 4
    for _ in range(5):
        window.ended(time.monotonic(), 0.4)
    assert window.size == 5  # about one more per window's worth of logins, no more doubling


def test_it_never_shrinks_below_the_floor_nor_grows_past_the_ceiling() -> None:
    window = Window(3)
    for _ in range(10):
        window.ended(time.monotonic(), 0.1)
    assert window.size == 3
    for _ in range(10):
        window.ended(time.monotonic(), None)
    assert window.size == FLOOR
    assert Window(1).size == 1  # "alone": one at a time


def test_take_blocks_while_full_and_stops_when_told() -> None:
    window = Window(2, size_f=2)
    stop = threading.Event()
    first, second = window.take(stop), window.take(stop)
    assert first is not None and second is not None
    got: list[float | None] = []
    waiter = threading.Thread(target=lambda: got.append(window.take(stop)))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # full
    window.give_back(first, 0.1)
    waiter.join(2)
    assert got and got[0] is not None
    stop.set()
    assert window.take(stop) is None
