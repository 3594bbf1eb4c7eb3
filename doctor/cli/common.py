"""What the commands share: the checks they select, the pipeline run with live progress, the
nodes reached before the checks load, and this node's facts.

Each command imports what only it uses, so `doctor --version` or `doctor collect` never pays
for the allreduce, the log reader or the renderers (tests/core/test_startup.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from doctor.core.errors import NodeUnavailable, UsageError
from doctor.nodes.targets import Targets
from doctor.pipeline.request import ProbeSettings, Request
from doctor.render.output import stderr_console, ui

if TYPE_CHECKING:
    from doctor.facts.node import NodeFacts
    from doctor.judge.report import Report
    from doctor.nodes.connect import Reached
    from doctor.plugin import CheckSpec
    from doctor.render.progress import Progress

THIS_NODE = Targets(local=True)


def select_checks(
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    plugins: tuple[str, ...] = (),
) -> tuple[CheckSpec, ...]:
    """The registered checks, all or those selected (of ``plugins`` only, when named); a
    selection that matches none is misuse."""
    from doctor.judge.registry import load_checks, select

    try:
        return tuple(select(load_checks(plugins), include or (), exclude or ()))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def progress() -> Progress:
    """Live progress on stderr, as the global switches ask."""
    from doctor.render.progress import Progress

    settings = ui()
    return Progress(stderr_console(), quiet=settings.quiet, verbose=settings.verbose)


def run(request: Request, reached: Reached | None = None) -> Report:
    """The pipeline, with live progress on stderr (on nodes already ``reached``, if given)."""
    from doctor.pipeline import steps

    if reached is None:
        return steps.run(request, progress())
    return steps.run_connected(request, *reached, progress())


def reaching(targets: Targets) -> AbstractContextManager[Reached]:
    """The nodes and their transport, to enter before the checks load: the SSH handshakes then
    go on while the checks and their facts are imported (0.1 s), not after."""
    from doctor.nodes.connect import connect

    return connect(targets)


def here(command: str, probe: ProbeSettings, checks: tuple[CheckSpec, ...] = ()) -> NodeFacts:
    """This node's facts, probed now (``checks``: whose probe requests to honour; none judged)."""
    request = Request(command, targets=THIS_NODE, probe=probe, checks=checks, judge=False)
    report = run(request)
    for failure in report.cluster.failures.values():
        raise NodeUnavailable(failure.summary)
    (facts,) = report.cluster.nodes.values()
    return facts
