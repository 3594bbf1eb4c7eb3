"""The entry point: run a command and map every way it can end to the documented exit codes.

Every ending is one line on stderr and its code (README, "Exit codes"): a usage error 2, the tool
or a plugin broken 3, Ctrl-C 130; never a traceback unless DOCTOR_DEBUG asks for it.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import traceback
from pathlib import Path

import typer

from doctor.cli import app
from doctor.config import config_defaults
from doctor.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    NodeUnavailable,
    PluginError,
    UsageError,
)
from doctor.output import stderr_console

# At exit, Python's last collection walks every object the imports made (40 ms of a 0.6 s
# `doctor collect`) to free memory the process hands back anyway; frozen, they are skipped.
# atexit handlers run before that collection, and the flush of stdout after it, as before.
atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    """Entry point: maps every way a run can end to the documented exit codes, one line each."""
    err = stderr_console()
    try:
        rv = app(
            args=argv,
            prog_name="doctor",
            standalone_mode=False,
            default_map=config_defaults(typer.main.get_command(app), Path.cwd()),
        )
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
            return EXIT_OK
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"doctor: error: {message}", markup=False)
        return EXIT_USAGE
    except UsageError as exc:
        err.print(f"doctor: error: {exc}", markup=False)
        return EXIT_USAGE
    except (NodeUnavailable, PluginError) as exc:
        err.print(f"doctor: {exc}", markup=False)
        return EXIT_INTERNAL
    except (KeyboardInterrupt, typer.Abort):
        err.print("doctor: interrupted", markup=False)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("DOCTOR_DEBUG"):
            traceback.print_exc()
        err.print(
            f"doctor: internal error: {type(exc).__name__}: {exc} "
            "(set DOCTOR_DEBUG=1 for the traceback, and please report it)",
            markup=False,
        )
        return EXIT_INTERNAL
    return rv if isinstance(rv, int) else EXIT_OK
