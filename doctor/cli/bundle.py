"""Captures as files: `doctor probe` prints this node's, `doctor collect` saves every node's (a
support bundle), `doctor analyze` judges saved or pasted ones as if the nodes were probed now,
`doctor baseline save` keeps a known-good node's to judge drift by."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from doctor.cli.common import here, reaching, run, select_checks
from doctor.core.errors import EXIT_OK, NodeUnavailable, UsageError
from doctor.nodes.targets import Targets
from doctor.pipeline.request import CheckSettings, ProbeSettings, Request
from doctor.render.output import OutputOptions, emit, stderr_console, ui


def probe(probe: ProbeSettings) -> int:
    """Print this node's raw capture (JSON): what every check is judged on."""
    raw = here("probe", probe, select_checks()).capture.raw
    sys.stdout.write(json.dumps(raw, indent=1, sort_keys=True) + "\n")
    return EXIT_OK


def baseline_save(
    file: Annotated[Path, typer.Argument(help="Where to write the baseline (JSON).")],
    probe: ProbeSettings,
    source: Annotated[
        Path | None,
        typer.Option("--from", help="Use this saved capture (<node>.json) instead of probing."),
    ] = None,
) -> int:
    """Save this known-good node (or a saved capture of one) as the baseline for --baseline."""
    from doctor.pipeline.baseline import load_baseline, save_baseline

    try:
        facts = load_baseline(source) if source else here("baseline", probe, select_checks())
    except NodeUnavailable as exc:
        raise UsageError(f"cannot save a baseline: {exc}") from None
    save_baseline(file, facts.capture.raw)
    if not ui().quiet:
        stderr_console().print(f"saved baseline {file}; use it with --baseline {file}")
    return EXIT_OK


def collect(
    save_raw: Annotated[
        Path, typer.Option("--save-raw", help="Folder to write one <node>.json capture per node.")
    ],
    probe: ProbeSettings,
    targets: Targets,
) -> int:
    """Save raw captures (a support bundle); 'doctor analyze DIR' checks them later."""
    with reaching(targets) as reached:
        from doctor.pipeline.saved import prepare, save_captures

        prepare(save_raw)
        request = Request(
            "collect", targets=targets, probe=probe, checks=select_checks(), judge=False
        )
        report = run(request, reached)
    for path in save_captures(save_raw, report.cluster):
        if not ui().quiet:
            stderr_console().print(f"saved {path}", markup=False)
    return EXIT_OK if not report.cluster.failures else 1


def analyze(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Captures ('doctor collect --save-raw' folders or files) or pasted command "
            "output: FILE, DIR, NODE=FILE, or - for stdin. docs/paste.md lists what is read.",
            show_default=False,
        ),
    ],
    output: OutputOptions,
    checks: CheckSettings,
    node: Annotated[
        str | None, typer.Option("--node", help="The node that '-' (stdin) describes.")
    ] = None,
) -> int:
    """Run the checks on saved captures or pasted output, as if the nodes were probed now."""
    from doctor.paste import read_inputs, skipped

    captures = read_inputs(inputs, stdin_node=node)
    if not ui().quiet:
        for line in (note for cap in captures.values() for note in skipped(cap)):
            stderr_console().print(line, markup=False, highlight=False)
    request = Request(
        "analyze",
        captures=captures,
        checks=select_checks(checks.include, checks.exclude),
        baseline=checks.baseline,
        thresholds=checks.thresholds(),
        nics_section=True,
    )
    return emit(run(request), output)
