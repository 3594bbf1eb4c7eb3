"""The JUnit XML report: validated against tests/fixtures/junit.xsd with xmllint, and mapped
the way pytest maps results (failure, error, skipped, passed with output)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from builders import build_report, node, sample_report

from doctor.core.model import Severity
from doctor.facts.cluster import ClusterFacts
from doctor.render.junit import render_junit

XSD = Path(__file__).parent.parent / "fixtures" / "junit.xsd"


def xmllint(document: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # xmllint comes from Debian's libxml2-utils; CI installs it, so its absence is a failure.
    assert shutil.which("xmllint"), "xmllint missing: apt-get install libxml2-utils"
    path = tmp_path / "report.xml"
    path.write_text(document, encoding="utf-8")
    return subprocess.run(
        ["xmllint", "--noout", "--schema", str(XSD), str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def suites(document: str) -> dict[str, ET.Element]:
    return {s.get("name", ""): s for s in ET.fromstring(document).iter("testsuite")}


def case(suite: ET.Element, name: str) -> ET.Element:
    (found,) = [c for c in suite.iter("testcase") if c.get("name") == name]
    return found


def test_sample_report_is_valid_junit(tmp_path: Path) -> None:
    result = xmllint(render_junit(sample_report()), tmp_path)
    assert result.returncode == 0, result.stderr


def test_schema_rejects_a_report_without_counts(tmp_path: Path) -> None:
    root = ET.fromstring(render_junit(sample_report()))
    del root.find("testsuite").attrib["tests"]  # type: ignore[union-attr]
    result = xmllint(ET.tostring(root, "unicode"), tmp_path)
    assert result.returncode != 0 and "tests" in result.stderr


def test_one_suite_per_node_and_one_for_the_cluster() -> None:
    found = suites(render_junit(sample_report()))
    assert list(found) == ["gpu01", "gpu02", "gpu03", "gpu04", "cluster"]
    assert [c.get("name") for c in found["gpu01"].iter("testcase")] == [
        "shm.size",
        "test.addresses",
        "test.crashes",
    ]
    assert [c.get("name") for c in found["cluster"].iter("testcase")] == [
        "node.reach",
        "test.skips",
    ]


def test_outcomes_map_as_pytest_maps_them() -> None:
    found = suites(render_junit(sample_report()))
    failure = case(found["gpu01"], "shm.size").find("failure")
    assert failure is not None and failure.get("type") == "shm.too_small"
    assert "docker run --shm-size=1g" in (failure.text or "")
    error = case(found["gpu01"], "test.crashes").find("error")
    assert error is not None and error.get("message") == "RuntimeError: boom on gpu01"
    skipped = case(found["cluster"], "test.skips").find("skipped")
    assert skipped is not None and skipped.get("message") == "no ssh mesh stage in this run"
    # A warning below --fail-on passes, with the finding in its output.
    warned = case(found["gpu02"], "shm.size")
    assert warned.find("failure") is None and "shm.small" in (warned.findtext("system-out") or "")
    unreachable = case(found["gpu04"], "probe").find("error")
    assert unreachable is not None and unreachable.get("type") == "node.timeout"
    counts = {k: found["gpu01"].get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "3", "failures": "1", "errors": "1", "skipped": "0"}
    root = ET.fromstring(render_junit(sample_report()))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("12", "2", "4")


def test_fail_on_warn_turns_warnings_into_failures() -> None:
    found = suites(render_junit(sample_report(), fail_on=Severity.WARN))
    failure = case(found["gpu02"], "shm.size").find("failure")
    assert failure is not None and failure.get("type") == "shm.small"


def test_garbage_evidence_still_gives_valid_xml(tmp_path: Path) -> None:
    report = build_report(ClusterFacts(nodes={"gpu01": node("gpu01", shm=1 << 20)}))
    bad = '\x00\x07 <tag> & "quoted" \udcff \x1b[31m'
    outcome = report.outcomes[1]
    finding = dataclasses.replace(outcome.findings[0], evidence=(bad,), summary=bad)
    report.outcomes[1] = dataclasses.replace(outcome, findings=(finding,))
    document = render_junit(report)
    assert xmllint(document, tmp_path).returncode == 0
    text = case(suites(document)["gpu01"], "shm.size").findtext("failure") or ""
    assert '<tag> & "quoted"' in text
