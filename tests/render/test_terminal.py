"""The text report, compared with stored text on a fixed-width, colourless console."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from builders import build_report, node, sample_report
from rich.console import Console

from checks.system import CHECKS as SYSTEM_CHECKS
from doctor.core.model import Finding
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.reach import Reachability, ReachLink
from doctor.plugin import Skip, cluster_check
from doctor.render.terminal import Detail, render_text
from render.golden import assert_golden


def text_of(report, detail: Detail = "normal") -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, soft_wrap=True, highlight=False)
    render_text(report, console, detail)
    return out.getvalue()


@pytest.mark.parametrize("detail", ["normal", "verbose", "quiet"])
def test_sample_report_text(detail: Detail) -> None:
    assert_golden(f"sample-{detail}.txt", text_of(sample_report(), detail))


def test_clean_single_node_text() -> None:
    report = build_report(ClusterFacts(nodes={"gpu01": node("gpu01")}))
    assert_golden("clean-normal.txt", text_of(report))


def test_quiet_prints_nothing_on_a_clean_run() -> None:
    report = build_report(ClusterFacts(nodes={"gpu01": node("gpu01")}))
    assert text_of(report, "quiet") == ""


def test_baseline_is_named_in_the_header() -> None:
    cluster = ClusterFacts(nodes={"gpu01": node("gpu01")}, baseline=node("golden"))
    assert "against baseline golden" in text_of(build_report(cluster)).splitlines()[0]


def test_reachability_table_says_which_interfaces_every_peer_reached() -> None:
    ifaces = {"a": {"eth0": "10.0.0.1", "ens6": "10.9.0.1"}, "b": {"eth0": "10.0.0.2"}}
    links = (
        ReachLink("a", "b", "eth0", "10.0.0.2", "ok"),
        ReachLink("b", "a", "eth0", "10.0.0.1", "ok"),
        ReachLink("b", "a", "ens6", "10.9.0.1", "timeout"),
    )
    report = build_report(ClusterFacts(nodes={"a": node("a"), "b": node("b")}))
    report.sections["reachability"] = Reachability(("a", "b"), ifaces, links, 4000).to_section()
    text = text_of(report)
    assert "  every peer reached eth0 on a,b\n" in text
    assert "ens6" not in text.split("TCP reachability")[1].split("Findings")[0]


def _skipper(check_id: str, reason: str):
    @cluster_check(check_id, f"Test check {check_id}", codes={})
    def skipped(cluster: ClusterFacts) -> Iterator[Finding]:
        raise Skip(reason)

    return skipped


# Three checks skipped for one reason, one for another, next to the system checks (one fails).
FOLDING = [
    *[_skipper(f"test.gpu{i}", "no NVIDIA GPU on this node") for i in range(3)],
    _skipper("test.mesh", "no ssh mesh stage in this run"),
    *SYSTEM_CHECKS,
]


def test_skips_fold_to_one_line_after_the_findings_and_the_checks_that_ran() -> None:
    cluster = ClusterFacts(nodes={"a": node("a", shm=64 << 20), "b": node("b")})
    text = text_of(build_report(cluster, FOLDING))
    assert_golden("skips-normal.txt", text)
    lines = text.splitlines()
    fold = (
        "  skip  4 checks skipped for 2 reasons (commonest: no NVIDIA GPU on this node, 3)"
        "  (--verbose lists them)"
    )
    assert lines.count(fold) == 1 and not any("test.gpu" in line for line in lines)
    assert sum(line.startswith("  skip") for line in lines) == 1
    # Findings first, then the checks (the failing one first), the summary line last.
    assert lines.index("Findings") < lines.index("Checks") < lines.index(fold)
    assert lines[lines.index("Checks") + 1].startswith("  FAIL  shm.size")
    assert lines[-1] == "1 fail, 0 warn, 2 pass, 4 skip"


def test_one_reason_is_given_whole_and_one_check_by_its_id() -> None:
    cluster = ClusterFacts(nodes={"a": node("a")})
    gpu_only = text_of(build_report(cluster, [*FOLDING[:3], *SYSTEM_CHECKS])).splitlines()
    fold = "  skip  3 checks skipped: no NVIDIA GPU on this node  (--verbose lists them)"
    assert fold in gpu_only
    mesh_only = text_of(build_report(cluster, [FOLDING[3], *SYSTEM_CHECKS])).splitlines()
    assert "  skip  test.mesh                no ssh mesh stage in this run" in mesh_only


def test_verbose_lists_every_skipped_check() -> None:
    cluster = ClusterFacts(nodes={"a": node("a")})
    text = text_of(build_report(cluster, FOLDING), "verbose")
    for i in range(3):
        assert f"  skip  test.gpu{i}                cluster" in text
    assert "checks skipped" not in text
