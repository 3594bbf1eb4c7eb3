"""The text report, compared with stored text on a fixed-width, colourless console."""

from __future__ import annotations

import io

import pytest
from builders import build_report, node, sample_report
from rich.console import Console

from doctor.facts.cluster import ClusterFacts
from doctor.facts.reach import Reachability, ReachLink
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
