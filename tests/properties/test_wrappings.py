"""Every healthy log the project has, wrapped in every collector's form (and in several at once),
reads exactly as it does unwrapped: the same findings (none of them FAIL) and the same NCCL
facts, in `doctor explain` (and the live allreduce, which feeds the same scanner) and in
`doctor analyze` (a pasted log through the paste reader, the facts and the nccl.log checks).

What a wrapping adds of its own is left out of the comparison: the ranks, hosts and times its
prefix names (a journald host, a launcher's task label) label findings, and may say which host
printed a bare version line (``version_printed_by``), but change no other fact.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checks.nccl_log import nccl_log
from doctor.core.model import Missing, Severity
from doctor.explain.engine import Explanation, findings
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import parse_node
from doctor.paste import read_inputs
from tests.explain.fixtures import LOGS, body, scan_text
from tests.properties.counting import counted
from tests.properties.wrappings import FORMS, ray_deduplicated, wrap

PASTES = Path(__file__).resolve().parents[1] / "fixtures" / "paste"
# Captured here by the project's capture scripts (tests/explain/capture) and its paste fixture.
CAPTURED = [*sorted(LOGS.glob("real/healthy-*.log")), PASTES / "nccl-debug-bootstrap.log"]
# Written from NCCL's format strings (their headers say which): the NCCL facts of every version.
WRITTEN = [
    LOGS / "nccl" / name
    for name in (
        "v2.4-ib-mpirun.log",
        "v2.7-socket-torchrun.log",
        "v2.12-ib-gdr-srun.log",
        "v2.18-roce-k8s-hpcx.log",
        "v2.21-efa-ofi.log",
        "rccl-roce.log",
    )
]
# A healthy job's noise that names errors without one (c10d's retries, NCCL INFO, metrics).
WRITTEN.append(LOGS / "tail" / "healthy-noisy.log")
HEALTHY = {p.name: body(p).decode().splitlines() for p in CAPTURED + WRITTEN}
NCCL_LOGS = sorted(n for n, lines in HEALTHY.items() if any("NCCL INFO" in x for x in lines))


def explained(lines: list[str]) -> Explanation:
    return scan_text("\n".join(lines), "log")


def explain_facts(result: Explanation) -> dict[str, Any]:
    found = findings(result)
    return {
        "findings": sorted(
            (f.code, str(f.severity), f.data["count"], f.data["first_seen"]) for f in found
        ),
        "nccl": None if result.nccl.is_empty() else _without_banner_host(result.nccl.to_json()),
        "lines": result.lines,
    }


def _without_banner_host(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "version_printed_by"}


def analyzed(lines: list[str]) -> tuple[Any, list[tuple[str, str]]]:
    """A pasted log's NCCL facts and the nccl.log check's findings, as `doctor analyze` gives."""
    data = ("\n".join(lines) + "\n").encode()
    capture = read_inputs(["-"], stdin_node="n1", stdin=io.BytesIO(data))["n1"]
    facts = parse_node("n1", capture)
    log = facts.nccl.log if not isinstance(facts.nccl, Missing) else None
    nccl = None if log is None else _without_banner_host(log)
    cluster = ClusterFacts(nodes={"n1": facts})
    found = [] if log is None else list(nccl_log.fn(cluster))
    return nccl, sorted((f.code, str(f.severity)) for f in found)


FORM_NAMES = sorted(FORMS)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(HEALTHY)),
    st.lists(st.sampled_from(FORM_NAMES), min_size=1, max_size=3, unique=True),
)
@counted("explain (wrapped healthy logs)")
def test_a_wrapped_healthy_log_explains_as_unwrapped(name: str, forms: list[str]) -> None:
    lines = HEALTHY[name]
    plain = explain_facts(explained(lines))
    wrapped = explain_facts(explained(wrap(lines, forms)))
    assert wrapped == plain
    assert all(severity != str(Severity.FAIL) for _, severity, _, _ in wrapped["findings"])


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(NCCL_LOGS),
    st.lists(st.sampled_from(FORM_NAMES), min_size=1, max_size=3, unique=True),
)
@counted("analyze (wrapped healthy NCCL logs)")
def test_a_wrapped_healthy_nccl_log_analyzes_as_unwrapped(name: str, forms: list[str]) -> None:
    lines = HEALTHY[name]
    plain, plain_checked = analyzed(lines)
    wrapped, checked = analyzed(wrap(lines, forms))
    assert wrapped == plain and checked == plain_checked
    assert all(severity != str(Severity.FAIL) for _, severity in checked)


def test_every_form_alone_on_every_healthy_log() -> None:
    """The whole grid once, beside the random stacks above."""
    for name, lines in HEALTHY.items():
        plain = explain_facts(explained(lines))
        for form in FORM_NAMES:
            assert explain_facts(explained(wrap(lines, [form]))) == plain, (name, form)


def test_ray_de_duplication_hides_lines_but_never_raises_a_failure() -> None:
    """Ray holds back a line of a shape another worker already printed: those workers' values
    are not shown, so nothing may differ; the held-back lines count in what they stand for."""
    for name in NCCL_LOGS:
        lines = HEALTHY[name]
        deduplicated = ray_deduplicated(lines)
        result = explained(deduplicated)
        assert {f.code for f in findings(result)} <= {f.code for f in findings(explained(lines))}
        _, checked = analyzed(deduplicated)
        assert all(severity != str(Severity.FAIL) for _, severity in checked), (name, checked)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(HEALTHY)), st.data())
@counted("explain (an excerpt starting mid-line)")
def test_an_excerpt_that_starts_mid_line(name: str, data: st.DataObject) -> None:
    """The excerpt's first line is the tail of a line cut anywhere: the rest reads as before,
    each process the whole log names keeps its facts, and the fragment raises no failure."""
    lines = HEALTHY[name]
    cut_from = data.draw(st.sampled_from(lines))
    at = data.draw(st.integers(0, len(cut_from)))
    result = explained([cut_from[at:], *lines])
    plain = explained(lines)
    assert all(f.severity is not Severity.FAIL for f in findings(result))
    assert {f.code for f in findings(plain)} <= {f.code for f in findings(result)}
    if not plain.nccl.is_empty():
        before = {(p["host"], p["pid"]): p for p in plain.nccl.to_json()["processes"]}
        after = {(p["host"], p["pid"]): p for p in result.nccl.to_json()["processes"]}
        for key, proc in before.items():
            if key != (None, None):
                assert {k: v for k, v in after[key].items() if k != "version"} == {
                    k: v for k, v in proc.items() if k != "version"
                }
