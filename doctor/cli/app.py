"""The command line: flags -> Request -> pipeline -> rendered report -> exit code.

Every command is a plain function returning its exit code, in the module of its group
(preflight, job, bundle, node, explain, checks); what it runs is one Request to the pipeline
(doctor/pipeline/steps.py). Flags shared by several commands are declared once, on the request's
dataclasses (doctor/pipeline/request.py, doctor/nodes/targets.py, doctor/render/output.py), and
expanded by ``options`` (doctor/cli/options.py); a flag only one command has is declared beside
it. A new command: a function in its group's module and one line in COMMANDS.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from doctor import __version__
from doctor.cli import bundle, checks, explain, job, node, preflight
from doctor.cli.options import options
from doctor.render.output import Ui, set_ui

app = typer.Typer(
    name="doctor",
    help="Find what will break multi-node GPU training before you launch it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
checks_app = typer.Typer(help="List the checks.", no_args_is_help=True)
app.add_typer(checks_app, name="checks")
baseline_app = typer.Typer(help="Save a known-good node to judge drift by.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")

# Every command, in the order `doctor --help` lists them: (its group, its name, the function).
COMMANDS: tuple[tuple[typer.Typer, str, Callable[..., int]], ...] = (
    (app, "preflight", preflight.preflight),
    (app, "run", job.run_job),
    (app, "stacks", job.stacks),
    (app, "allreduce", preflight.allreduce),
    (app, "nics", node.nics),
    (app, "probe", bundle.probe),
    (baseline_app, "save", bundle.baseline_save),
    (app, "collect", bundle.collect),
    (app, "analyze", bundle.analyze),
    (app, "topo", node.topo),
    (app, "explain", explain.explain),
    (checks_app, "list", checks.checks_list),
    (checks_app, "reference", checks.checks_reference),
)
for group, name, command in COMMANDS:
    group.command(name)(options(command))


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"cluster-doctor {__version__}\n")
        raise typer.Exit(0)


@app.callback()
@options
def _root(
    settings: Ui,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Defaults from this TOML file, trusted as the command line is (else doctor.toml "
            "or pyproject.toml here; docs/usage.md).",
        ),
    ] = None,
) -> None:
    """Find what will break multi-node GPU training before you launch it."""
    # --config is read before the command line is parsed (doctor/cli/main.py: it gives the parse
    # its defaults) and taken out of it; it is declared here for --help alone.
    set_ui(settings)
