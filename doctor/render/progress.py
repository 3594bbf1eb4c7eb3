"""Progress on stderr while nodes are probed and the cross-node stages run.

On a terminal one live line says how many nodes answered and names the ones still awaited (it
scales to a thousand nodes, where a row per node would not), then how many pairs each stage has
tested out of how many; it vanishes when the step ends. Elsewhere (CI logs) nothing is redrawn:
a node that fails is one line, and with ``--verbose`` every node is one line as it answers.
``--quiet`` shows nothing.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from doctor.core.capture import Capture
from doctor.core.model import NodeFailure
from doctor.core.nodeset import compact


class Progress:
    """The pipeline's Watcher on a console (doctor/pipeline/steps.py)."""

    def __init__(self, console: Console, *, quiet: bool = False, verbose: bool = False) -> None:
        self.console = console
        self.pending: dict[str, None] = {}
        self.total = 0
        self.failed = 0
        self.quiet = quiet
        self.verbose = verbose
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._stage = ""  # the cross-node stage running, if any
        self._pairs = (0, 0)  # its pairs tested, of how many

    def line(self) -> Text:
        if self._stage:
            tested, total = self._pairs
            return Text(f"{self._stage}: {tested} of {total} pairs tested")
        done = self.total - len(self.pending)
        text = Text(f"probing {self.total} node{'s' if self.total != 1 else ''}: {done} answered")
        if self.failed:
            text.append(f", {self.failed} failed", style="red")
        if self.pending:
            text.append(f"; waiting on {compact(self.pending)}", style="dim")
        return text

    def probing(self, names: list[str]) -> None:
        self.pending = dict.fromkeys(names)
        self.total = len(names)
        self.started = time.monotonic()
        self._show()

    def testing(self, stage: str) -> None:
        self._stage, self._pairs = stage, (0, 0)
        self._show()

    def tested(self, stage: str, pairs: int, total: int) -> None:
        with self._lock:
            self._pairs = (pairs, total)
            if self._live is not None:
                self._live.update(self.line())

    def done(self) -> None:
        self._stage = ""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _show(self) -> None:
        if not self.quiet and self.console.is_terminal:
            self._live = Live(self.line(), console=self.console, transient=True)
            self._live.start()

    def probed(self, name: str, result: Capture | NodeFailure) -> None:
        """Called from the probe's worker threads as each node answers."""
        with self._lock:
            self.pending.pop(name, None)
            seconds = time.monotonic() - self.started
            if isinstance(result, NodeFailure):
                self.failed += 1
                if not self.quiet:
                    self.console.print(
                        Text(f"{name}: {result.summary} ({seconds:.1f}s)", style="red")
                    )
            elif self.verbose:
                self.console.print(Text(f"{name}: probed ({seconds:.1f}s)", style="dim"))
            if self._live is not None:
                self._live.update(self.line())
