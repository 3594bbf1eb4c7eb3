"""The entry point: run a command and map every way it can end to the documented exit codes.

Every ending is one line on stderr and its code (README, "Exit codes"): a usage error 2, the tool
or a plugin broken 3, Ctrl-C 130; never a traceback unless DOCTOR_DEBUG asks for it.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from pathlib import Path

from doctor.core.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    NodeUnavailable,
    PluginError,
    UsageError,
)

# At exit, Python's last collection walks every object the imports made (40 ms of a 0.6 s
# `doctor collect`) to free memory the process hands back anyway; frozen, they are skipped.
# atexit handlers run before that collection, and the flush of stdout after it, as before.
atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    """Entry point: maps every way a run can end to the documented exit codes, one line each."""
    try:
        from doctor.cli.config import take_config_flag

        explicit, args = take_config_flag(sys.argv[1:] if argv is None else list(argv))
        quick = None if explicit else _explain_quickly(args)
        return quick if quick is not None else _run_app(args, explicit)
    except UsageError as exc:
        _say(f"doctor: error: {exc}")
        return EXIT_USAGE
    except (NodeUnavailable, PluginError) as exc:
        _say(f"doctor: {exc}")
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        _say("doctor: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        # typer's own endings, where the command line was typer's (not the quick path).
        typer = sys.modules.get("typer")
        if typer is not None and isinstance(exc, typer.Exit):
            return int(exc.exit_code)
        if typer is not None and isinstance(exc, typer.Abort):
            _say("doctor: interrupted")
            return EXIT_INTERRUPTED
        if typer is not None and isinstance(exc, typer.TyperException):
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                sys.stdout.write(ctx.get_help() + "\n")
                return EXIT_OK
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            _say(f"doctor: error: {message}")
            return EXIT_USAGE
        if os.environ.get("DOCTOR_DEBUG"):
            import traceback  # here: 3 ms of every start, for a run that went wrong

            traceback.print_exc()
        _say(
            f"doctor: internal error: {type(exc).__name__}: {exc} "
            "(set DOCTOR_DEBUG=1 for the traceback, and please report it)"
        )
        return EXIT_INTERNAL


def _say(line: str) -> None:
    from doctor.render.output import stderr_console

    stderr_console().print(line, markup=False)


def _run_app(args: list[str], explicit: Path | None) -> int:
    import typer

    from doctor.cli.app import app
    from doctor.cli.config import load_config
    from doctor.core.printable import say
    from doctor.judge.thresholds import set_overrides

    config = load_config(Path.cwd(), explicit)
    defaults = None
    if config is not None:
        for line in config.notice():
            say(line)
        defaults = config.defaults(typer.main.get_command(app))
    # The thresholds of this run: the file's; the shipped ones again after it (a caller that
    # runs the doctor in its process, as the tests do, starts every run from them).
    set_overrides(config.thresholds if config else {}, str(config.path) if config else "")
    try:
        rv = app(args=args, prog_name="doctor", standalone_mode=False, default_map=defaults)
    finally:
        set_overrides({}, "")
    return rv if isinstance(rv, int) else EXIT_OK


def _explain_quickly(args: list[str]) -> int | None:
    """``doctor explain [--format|-f text|json] [FILE...|-]`` without the command-line library:
    its imports and the building of every command's options take 0.15 s, more than explaining
    most logs. Anything else (another option, --help, a bad value), or a config file here (which
    may change explain's defaults), goes through the full command line (None)."""
    if args[:1] != ["explain"]:
        return None
    from doctor.cli.config import find_config

    if find_config(Path.cwd()) is not None:
        return None
    fmt, logs, rest = "text", [], args[1:]
    while rest:
        arg = rest.pop(0)
        if arg in ("--format", "-f") and rest:
            fmt = rest.pop(0)
        elif arg.startswith("--format="):
            fmt = arg.partition("=")[2]
        elif arg == "-" or not arg.startswith("-"):
            logs.append(arg)
        else:
            return None
    if fmt not in ("text", "json"):
        return None
    # No cyclic garbage collection for the rest of this short process: its imports and its
    # search make a few hundred thousand objects, and the collector walked them 200 times over a
    # 200 MB log (5 % of the command) to free the same few hundred cycles whatever the log's size.
    gc.disable()
    # The first plain log is mapped and searched from now on, while the reader loads.
    from doctor.explain.mapped import read_ahead
    from doctor.explain.sieve import Sieve
    from doctor.explain.source import LogReadError, expand
    from doctor.explain.stored import anchors

    try:
        logs = expand(logs)
    except LogReadError:
        return None  # the full command line says what is wrong
    ahead = read_ahead(logs, Sieve((), anchors()))
    from doctor.render.explain import show_explanation

    if fmt == "json":
        show_explanation(logs, True, None, ahead)
    else:
        from doctor.render.output import stdout_console

        show_explanation(logs, False, stdout_console(), ahead)
    return EXIT_OK
