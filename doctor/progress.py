"""Per-node progress on stderr while nodes are probed.

On a terminal one live line says how many nodes answered and names the ones still awaited (it
scales to a thousand nodes, where a row per node would not); it vanishes when collection ends.
Elsewhere (CI logs) nothing is redrawn: a node that fails is one line, and with ``--verbose``
every node is one line as it answers. ``--quiet`` shows nothing.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from doctor.capture import Capture
from doctor.model import NodeFailure
from doctor.nodeset import compact


class Progress:
    """The pipeline's Watcher on a console (doctor/pipeline.py)."""

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

    def line(self) -> Text:
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
        if not self.quiet and self.console.is_terminal:
            self._live = Live(self.line(), console=self.console, transient=True)
            self._live.start()

    def done(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

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
