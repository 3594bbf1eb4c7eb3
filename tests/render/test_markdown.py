"""The Markdown report, compared with stored expected output."""

from __future__ import annotations

from builders import build_report, node, sample_report

from doctor.facts.cluster import ClusterFacts
from doctor.render.markdown import render_markdown, version_columns
from render.golden import assert_golden


def test_sample_report_markdown() -> None:
    assert_golden("sample.md", render_markdown(sample_report()))


def test_clean_report_with_baseline_markdown() -> None:
    cluster = ClusterFacts(nodes={"gpu01": node("gpu01")}, baseline=node("golden", kernel="6.1.0"))
    assert_golden("clean-baseline.md", render_markdown(build_report(cluster)))


def test_odd_sections_do_not_break_the_document() -> None:
    report = build_report(ClusterFacts(nodes={"gpu01": node("gpu01")}))
    report.sections["allreduce"] = {"ok": True, "ranks": [0, 1], "deep": {"a": {"b": {"c": 1}}}}
    report.sections["nics"] = [{"name": "eth0", "note": "pipe | in\nit"}]
    text = render_markdown(report)
    assert "### ok\n\nTrue\n" in text and "### ranks\n\n0, 1\n" in text
    assert '"c": 1' in text  # too deep for a table: shown as JSON
    assert "| eth0 | pipe \\| in it |" in text


def test_versions_are_found_wherever_the_facts_keep_them() -> None:
    # Shaped like the driver, NCCL, MPI and framework fact areas (their to_json()).
    facts = {
        "system": {"python": "3.11.2", "kernel": "6.1.0"},
        "driver": {"version": "550.54.15", "cuda_version": "12.4", "module_version": "550.54.15"},
        "nccl": {
            "libraries": [{"version": "2.21.5"}, {"version": "2.18.1"}, {"version": "2.21.5"}]
        },
        "mpi": {"version": {"missing": "mpirun not found", "kind": "absent"}},
        "frameworks": {"torch": {"package": {"version": "2.4.0"}, "nccl_pin": "2.20.5"}},
    }
    assert version_columns(facts) == {
        "driver": "550.54.15",
        "driver.cuda": "12.4",
        "driver.module": "550.54.15",
        "nccl": "2.21.5, 2.18.1",
        "torch": "2.4.0",
    }
