"""Whether a rank is still there, from its heartbeats against the other ranks'.

Every rank beats from its first moment (channel.py), importing torch included. A transport tells
a rank's end by its exit status or the end of its output; srun tells neither for a task whose
node's processes all died, and such a rank looked like one still importing torch. Its silence
alone proves nothing either: the controller, or the whole machine, may have stalled (a loaded
2-core machine: every line then arrives late, together). So a rank is judged gone only when it
has been silent for SILENT_BEATS beats while another rank's beats kept arriving meanwhile: at
least OTHERS_BEATS of them, spread over SPREAD_BEATS beats of this clock (not one burst read after
the controller stalled, the silent rank's own lines perhaps a moment behind in its pipe). And
run.py takes that judgment only where the start waits for the silent ranks alone (every other
rank has imported torch) or its deadline is past: while the others import torch, a loaded
machine starves whole sessions (128 ranks on 2 cores at load 150: 11 went 10-14 s without a
line, and were well).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

BEAT_S = 1.0  # seconds between a rank's beats (the worker is told)
# Silent this many beats: gone. Beats come from a child process that needs next to no CPU (1.03 s
# apart at most on this 2-core machine at load 31); the controller's reader threads may wait for
# a CPU too. Far above both, and well inside the 30 s launch deadline.
SILENT_BEATS = 10
# A rank never heard from gets twice as long, counted from its start: its process may be
# starting later than the others' (srun creating its step, a slow SSH session).
UNHEARD_FACTOR = 2
OTHERS_BEATS = 5
SPREAD_BEATS = 3
KEPT = 4 * SILENT_BEATS  # arrivals kept per rank: enough to judge any silence by


@dataclass
class Pulse:
    """When each rank was last heard from (any line), and when its latest beats arrived, on the
    controller's clock."""

    beat_s: float = BEAT_S
    heard: dict[int, float] = field(default_factory=dict)
    since_start: set[int] = field(default_factory=set)  # started, not heard from yet
    beats: dict[int, deque[float]] = field(default_factory=dict)

    def started(self, rank: int, at: float) -> None:
        """The transport started the rank: its silence counts from now until its first line."""
        if rank not in self.heard:
            self.heard[rank] = at
            self.since_start.add(rank)

    def hear(self, rank: int, at: float, beat: bool) -> None:
        self.heard[rank] = max(at, self.heard.get(rank, at))
        self.since_start.discard(rank)
        if beat:
            self.beats.setdefault(rank, deque(maxlen=KEPT)).append(at)

    def gone(self, now: float, watched: Iterable[int]) -> list[int]:
        """The ranks of ``watched`` (started, neither ended nor failed) judged gone at ``now``."""
        found = []
        for rank in watched:
            heard = self.heard.get(rank)
            if heard is None:
                continue
            silent = SILENT_BEATS * self.beat_s
            if rank in self.since_start:
                silent *= UNHEARD_FACTOR
            if now - heard >= silent and self.others_beat_since(rank, heard):
                found.append(rank)
        return found

    def others_beat_since(self, rank: int, since: float) -> bool:
        """Whether another rank's beats kept arriving after ``since``: the controller was reading
        lines all along, so ``rank``'s silence is its own."""
        for other, arrivals in self.beats.items():
            if other == rank or not arrivals or arrivals[-1] <= since:
                continue
            after = [at for at in arrivals if at > since]
            if len(after) >= OTHERS_BEATS and after[-1] - after[0] >= SPREAD_BEATS * self.beat_s:
                return True
        return False

    def silent_for(self, rank: int, now: float) -> float:
        return now - self.heard.get(rank, now)
