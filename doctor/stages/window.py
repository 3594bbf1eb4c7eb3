"""How many logins a stage runs at once, sized by what they cost: a congestion window.

A login costs both ends a key exchange; where the nodes share CPUs (containers on one host, a
busy login node, a test bed) the doctor's own logins can slow each other past their timeouts,
and a timeout would be blamed on a healthy node. So the window grows while logins stay as fast
as the fastest seen and halves when one is much slower, or times out (TCP's AIMD, with Vegas's
idea of taking the fastest time seen as the uncongested one). It opens quickly where logins are
cheap: from START it grows by one per login that ended in time until the first sign of
congestion, then by one per window's worth, between FLOOR and the pipeline's budget
(``doctor.nodes.connect.WORKERS``: the ceiling; on a real cluster the window reaches it within a few
rounds).

A halving is applied once per window: a login handed out before the last cut was judged under
the old size and does not cut again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

START = 4
FLOOR = 2
# A login is slow (a sign of congestion) past SLOWER times the fastest seen plus SLACK seconds:
# the slack keeps jitter of a second on fast logins from counting.
SLOWER = 3.0
SLACK = 1.0


@dataclass
class Window:
    ceiling: int
    size_f: float = float(START)
    fastest: float | None = None
    cut_at: float = float("-inf")  # when the window last halved (monotonic)
    slow_start: bool = True
    busy: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.ceiling = max(1, self.ceiling)
        self.size_f = float(min(self.ceiling, max(FLOOR, self.size_f)))

    @property
    def size(self) -> int:
        return max(1, min(self.ceiling, int(self.size_f)))

    def slow(self, seconds: float) -> bool:
        """Whether a login that took ``seconds`` is slow against the fastest seen."""
        return self.fastest is not None and seconds > self.fastest * SLOWER + SLACK

    def ended(self, began: float, seconds: float | None) -> None:
        """A login handed out at ``began`` (monotonic) ended after ``seconds``; None: it timed
        out or hung (congestion, whatever else it means)."""
        with self._changed:
            if seconds is not None and not self.slow(seconds):
                self.fastest = seconds if self.fastest is None else min(self.fastest, seconds)
                self.size_f += 1.0 if self.slow_start else 1.0 / self.size_f
            elif began >= self.cut_at:
                self.size_f = max(float(FLOOR), self.size_f / 2)
                self.cut_at = time.monotonic()
                self.slow_start = False
            self.size_f = min(float(self.ceiling), self.size_f)
            self._changed.notify_all()

    # For callers that start work from their own threads (agent starts): take a place in the
    # window, blocking while it is full; give it back with ``ended``.
    def take(self, stop: threading.Event) -> float | None:
        """Wait for room; the monotonic time it was taken, or None once ``stop`` is set."""
        with self._changed:
            while self.busy >= self.size and not stop.is_set():
                self._changed.wait(0.05)
            if stop.is_set():
                return None
            self.busy += 1
            return time.monotonic()

    def give_back(self, began: float, seconds: float | None) -> None:
        with self._changed:
            self.busy -= 1
        self.ended(began, seconds)
