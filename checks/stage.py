"""What the checks of the cross-node stages share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from doctor.model import Finding, Severity


def not_run(code: str, what: str, reasons: Mapping[str, str]) -> Iterator[Finding]:
    """A stage's agent could not run on a node that answered the probe: warn, naming why."""
    for name, reason in reasons.items():
        yield Finding(code, Severity.WARN, f"{what} from {name}: {reason}", nodes=(name,))
