"""`doctor explain`: a failed job's logs, the cause and the fix (doctor/explain/). The command
line's quick path (doctor/cli/main.py) runs the same reader without typer."""

from __future__ import annotations

from typing import Annotated

import typer

from doctor.core.errors import EXIT_OK
from doctor.render.output import Format, Formatting, stdout_console


def explain(
    formatting: Formatting,
    logs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Log files (plain or gzip) or folders of them (every rank's output: torchrun "
            "--log-dir, Slurm's %t files, one per node; pasted py-spy dumps, ncclras, torchfrtrace "
            "output, Flight Recorder dumps); '-' or none reads stdin."
        ),
    ] = None,
) -> int:
    """Read failed or hung jobs' logs (NCCL, PyTorch, Gloo, Open MPI, ssh, a hung job's
    watchdog lines and stacks) and name the cause, the rank behind, and the fix."""
    from doctor.render.explain import show_explanation

    show_explanation(logs, formatting.fmt is Format.json, stdout_console())
    return EXIT_OK
