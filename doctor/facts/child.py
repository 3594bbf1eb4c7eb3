"""Output of the probe's child programs: one JSON line behind a marker; everything else is log."""

from __future__ import annotations

from typing import Any

from doctor.core.capture import CommandResult
from doctor.core.jsonable import loads


def marked(result: CommandResult, mark: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The child's JSON result (None when it printed none, or garbage) and its other lines."""
    data, log = None, []
    for line in result.stdout.splitlines():
        if line.startswith(mark):
            try:
                parsed = loads(line[len(mark) :])
            except ValueError:
                continue  # cut short (output limit, a kill mid-write): as if not printed
            data = parsed if isinstance(parsed, dict) else None
        elif line:
            log.append(line)
    return data, log


def last_words(result: CommandResult, stdout_too: bool = False) -> str:
    """Why a command failed, in one line: its last stderr line, or the exit code.

    ``stdout_too`` for programs that report failure on stdout (nvidia-smi does); the children's
    stdout is NCCL's log, which says nothing about why the child died.
    """
    text = result.stderr.strip() or (result.stdout.strip() if stdout_too else "")
    return text.splitlines()[-1] if text else f"exit code {result.rc}"
