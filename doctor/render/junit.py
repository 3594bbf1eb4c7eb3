"""The JUnit XML report (Jenkins, GitLab): a testsuite per node plus one for cluster-wide checks.

Outcomes map the way pytest maps test results: a check whose findings reach ``--fail-on`` is a
``<failure>``, a check that crashed is an ``<error>``, a skipped check is ``<skipped>``, and one
below the threshold passes with its findings in ``<system-out>`` (as pytest passes a test that
only warned). A node that could not be probed gets one ``probe`` testcase with an ``<error>``.
"""

from __future__ import annotations

import datetime as _dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

from doctor import __version__
from doctor.core.model import CheckOutcome, Finding, Severity, Status
from doctor.judge.report import Report

CLUSTER_SUITE = "cluster"
# Characters XML 1.0 cannot carry at all, even escaped; evidence quoted from a garbage log may
# hold them, and one would make the whole file unreadable to Jenkins.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class _Counts:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    def add(self, other: _Counts) -> None:
        self.tests += other.tests
        self.failures += other.failures
        self.errors += other.errors
        self.skipped += other.skipped
        self.time += other.time

    def attrs(self) -> dict[str, str]:
        return {
            "tests": str(self.tests),
            "failures": str(self.failures),
            "errors": str(self.errors),
            "skipped": str(self.skipped),
            "time": f"{self.time:.6f}",
        }


def _finding_text(f: Finding) -> str:
    lines = [f"{str(f.severity).upper()} {f.code}: {f.summary}"]
    lines += [f"  seen: {e}" for e in f.evidence]
    if f.fix:
        lines.append(f"  fix: {f.fix.text}")
        lines += [f"    $ {c}" for c in f.fix.commands]
    return "\n".join(lines)


class _Writer:
    def __init__(self, fail_on: Severity, redact: Callable[[str], str]) -> None:
        self.fail_on = fail_on
        self.redact = redact

    def clean(self, text: str) -> str:
        return _NOT_XML.sub("\ufffd", self.redact(text))

    def element(self, parent: ET.Element, tag: str, text: str = "", **attrs: str) -> ET.Element:
        """A child element whose every attribute and text has been through the redactor."""
        el = ET.SubElement(parent, tag, {k: self.clean(v) for k, v in attrs.items()})
        if text:
            el.text = self.clean(text)
        return el

    def testcase(self, suite: ET.Element, classname: str, o: CheckOutcome, counts: _Counts) -> None:
        case = self.element(suite, "testcase", name=o.check, classname=classname)
        case.set("time", f"{o.seconds:.6f}")
        counts.tests += 1
        counts.time += o.seconds
        failing = [f for f in o.findings if f.severity >= self.fail_on]
        if o.status is Status.CRASH:
            counts.errors += 1
            self.element(case, "error", o.reason, message=o.reason, type="crash")
        elif o.status is Status.SKIP:
            counts.skipped += 1
            self.element(case, "skipped", message=o.reason)
        elif failing:
            counts.failures += 1
            detail = "\n\n".join(_finding_text(f) for f in o.findings)
            self.element(case, "failure", detail, message=failing[0].summary, type=failing[0].code)
        elif o.findings:
            self.element(case, "system-out", "\n\n".join(_finding_text(f) for f in o.findings))

    def suite(
        self, root: ET.Element, report: Report, name: str, index: int
    ) -> tuple[ET.Element, _Counts]:
        suite = self.element(root, "testsuite", name=name, hostname=name)
        suite.set("id", str(index))
        suite.set("package", "cluster-doctor")
        suite.set("timestamp", _timestamp(report.created))
        props = ET.SubElement(suite, "properties")
        for key, value in (("command", report.command), ("tool.version", __version__)):
            ET.SubElement(props, "property", name=key, value=value)
        return suite, _Counts()


def _timestamp(created: str) -> str:
    """ISO 8601 in UTC without an offset: the form the Ant/Jenkins schema accepts."""
    try:
        moment = _dt.datetime.fromisoformat(created)
    except ValueError:
        return created
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


def render_junit(
    report: Report,
    fail_on: Severity = Severity.FAIL,
    redact: Callable[[str], str] = str,
) -> str:
    """The report as a JUnit XML document (a string, with its XML declaration)."""
    w = _Writer(fail_on, redact)
    root = ET.Element("testsuites", name="cluster-doctor")
    total = _Counts()
    cluster = report.cluster
    suites: list[tuple[str, list[CheckOutcome]]] = [(n, []) for n in cluster.names]
    suites.append((CLUSTER_SUITE, []))
    by_name = dict(suites)
    for o in report.outcomes:
        by_name[o.node if o.node is not None else CLUSTER_SUITE].append(o)
    for index, (name, outcomes) in enumerate(suites):
        suite, counts = w.suite(root, report, name, index)
        classname = "cluster-doctor." + redact(name).replace(".", "_")
        failure = cluster.failures.get(name)
        if failure is not None:
            case = w.element(suite, "testcase", name="probe", classname=classname, time="0")
            w.element(case, "error", failure.detail, message=failure.summary, type=failure.code)
            counts.tests += 1
            counts.errors += 1
        for o in outcomes:
            w.testcase(suite, classname, o, counts)
        for key, value in counts.attrs().items():
            suite.set(key, value)
        total.add(counts)
    for key, value in total.attrs().items():
        root.set(key, value)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
