"""What the checks of the cross-node stages share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from doctor.core.model import Finding, Severity


def not_run(code: str, what: str, reasons: Mapping[str, str]) -> Iterator[Finding]:
    """A stage's agent could not run on a node that answered the probe: warn, naming why."""
    for name, reason in reasons.items():
        yield Finding(code, Severity.WARN, f"{what} from {name}: {reason}", nodes=(name,))


# A node is blamed alone when at least this many peers tested it and every one of them failed:
# with fewer (a 3-node cluster), two failed pairs are still named as pairs.
ONE_NODE_FROM = 3


def whole_nodes(failed: Mapping[tuple[str, str], bool]) -> tuple[dict[str, list[str]], set[str]]:
    """Of the tested pairs ((source, target) -> failed), the nodes whose every incoming pair
    failed (target -> the sources) and the sources every one of whose pairs failed: the one node
    with the problem, rather than N failed pairs."""
    into: dict[str, list[tuple[str, bool]]] = {}
    out: dict[str, list[bool]] = {}
    for (source, target), bad in failed.items():
        into.setdefault(target, []).append((source, bad))
        out.setdefault(source, []).append(bad)
    targets = {
        t: sorted(s for s, _ in pairs)
        for t, pairs in into.items()
        if len(pairs) >= ONE_NODE_FROM and all(bad for _, bad in pairs)
    }
    sources = {s for s, bads in out.items() if len(bads) >= ONE_NODE_FROM and all(bads)}
    return targets, sources
