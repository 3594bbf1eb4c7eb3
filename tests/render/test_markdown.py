"""The Markdown report, compared with stored expected output."""

from __future__ import annotations

from builders import build_report, node, sample_report

from doctor.facts.cluster import ClusterFacts
from doctor.render.markdown import render_markdown
from render.golden import assert_golden


def test_sample_report_markdown() -> None:
    assert_golden("sample.md", render_markdown(sample_report()))


def test_clean_report_with_baseline_markdown() -> None:
    cluster = ClusterFacts(nodes={"gpu01": node("gpu01")}, baseline=node("golden", kernel="6.1.0"))
    assert_golden("clean-baseline.md", render_markdown(build_report(cluster)))


def test_odd_sections_do_not_break_the_document() -> None:
    report = build_report(ClusterFacts(nodes={"gpu01": node("gpu01")}))
    report.sections["allreduce"] = {"ok": True, "ranks": 2, "note": "a|b"}
    report.sections["nics"] = [{"name": "eth0", "note": "pipe | in\nit"}]
    text = render_markdown(report)
    assert '"note": "a|b"' in text  # not a table: shown as JSON
    assert "| eth0 | pipe \\| in it |" in text
