"""The kernel log reader: every coat a line comes in, every report it finds, and a healthy log
(captured here, and a GPU node's written from its drivers' formats) that gives nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.kernel.events import HAS_WORD, WORDS, event_of
from doctor.facts.kernel.lines import peel
from doctor.facts.kernel.log import KernelLogFacts, parse_kernel
from doctor.facts.nvidia.gpu_host import parse_gpu_host
from doctor.paste.reader import document
from doctor.pipeline.request import Request
from doctor.pipeline.steps import probe_spec
from doctor.stages import probe

FIXTURES = Path(__file__).parent.parent / "fixtures" / "host"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def pasted(log: str) -> KernelLogFacts:
    facts = parse_kernel(Capture(document("paste", log.encode(), False)))
    assert isinstance(facts, KernelLogFacts)
    return facts


def kinds(facts: KernelLogFacts) -> list[tuple[str, str, str]]:
    return [(e.kind, e.subject, e.severity) for e in facts.events]


def test_the_probe_keeps_exactly_the_lines_with_the_readers_words() -> None:
    """The words reach the probe in its spec (probe_spec), the readers' own: nothing to drift."""
    spec = probe_spec(Request("probe"), [])
    assert spec["kernel_words"] == list(WORDS)
    log = "a Xid here\nnothing\nsoft LOCKUP there\nNFS: server x not responding\n"
    assert probe._kernel_matches(log, spec["kernel_words"]) == [
        "a Xid here",
        "soft LOCKUP there",
        "NFS: server x not responding",
    ]
    assert probe._kernel_matches(log, []) == []


@pytest.mark.parametrize("name", ["written-dmesg-faults.txt", "written-journal-faults.txt"])
def test_every_report_holds_a_word_the_probe_keeps(name: str) -> None:
    for raw in text(name).splitlines():
        line = peel(raw)
        if line is not None and event_of(line) is not None:
            assert HAS_WORD.search(raw), raw


def test_every_report_of_the_written_log_is_found() -> None:
    facts = pasted(text("written-dmesg-faults.txt"))
    assert kinds(facts) == [
        ("sxid", "nvswitch3 0000:c5:00.0", "nonfatal"),  # its Severity and Data lines add none
        ("sxid", "nvswitch1 0000:86:00.0", "fatal"),
        ("soft_lockup", "CPU#12", ""),
        ("hard_lockup", "CPU#5", ""),
        ("hung_task", "kworker/u16:2:123", ""),
        ("rcu_stall", "RCU", ""),
        ("oom_kill", "python3 (pid 2412)", "global"),
        ("oom_kill", "pt_main_thread (pid 4321)", "cgroup"),
        ("oops", "kernel", "fatal"),
        ("oops", "kernel", "fatal"),
        ("nic_fatal", "0000:41:00.0", ""),
        ("nic_fatal", "0000:41:00.0", ""),
        ("nic_timeout", "0000:03:00.0", ""),
        ("nic_power", "0000:5c:00.0", ""),
        ("nic_temperature", "0000:5c:00.1", ""),
        ("nic_timeout", "0000:10:1b.0", ""),
        ("mce", "CPU", "corrected"),
        ("mce", "CPU 0", "fatal"),
        ("cpu_thermal", "CPU12", ""),
        ("memory", "MC1", "fatal"),
        ("aer", "0000:00:03.1", "fatal"),
        ("nfs_down", "fs01", ""),
        ("nfs_stale", "fs02", ""),
    ]
    assert facts.events[2].stamp == 9001.0
    assert facts.events[2].detail == "stuck for 23s running python:12345"
    # The Xid line is gpu.xid's, read from the same log.
    xid = parse_gpu_host(
        Capture(document("paste", text("written-dmesg-faults.txt").encode(), False))
    )
    assert not isinstance(xid.xid, Missing)
    assert [(e.bus_id, e.code) for e in xid.xid] == [("0000:3b:00", 79)]


def test_journal_and_syslog_lines_are_the_kernels_only() -> None:
    facts = pasted(text("written-journal-faults.txt"))
    assert kinds(facts) == [
        ("sxid", "nvswitch0 0000:05:00.0", "fatal"),
        ("soft_lockup", "CPU#3", ""),
        ("hung_task", "python3:4567", ""),
        ("oom_kill", "python3 (pid 2412)", "global"),
        ("nfs_down", "10.1.2.3", ""),
    ]  # containerd's and python3's own lines say the words but are not the kernel's
    assert facts.events[3].stamp == 12345.678901  # rsyslog keeps the kernel's own stamp


REPORT = "BUG: soft lockup - CPU#7 stuck for 41s! [kworker/7:2:388]"


@pytest.mark.parametrize(
    "line",
    [
        f"[ 4711.123456] watchdog: {REPORT}",  # dmesg
        f"[  +0.000123] watchdog: {REPORT}",  # dmesg -d
        f"[Nov29 06:30] watchdog: {REPORT}",  # dmesg -H
        f"[Sun Nov 29 06:30:54 2026] watchdog: {REPORT}",  # dmesg -T
        f"2026-11-29T06:30:54,123456+00:00 watchdog: {REPORT}",  # dmesg --time-format iso
        f"kern  :emerg : [ 4711.123456] watchdog: {REPORT}",  # dmesg -x
        f"<0>[ 4711.123456] watchdog: {REPORT}",  # dmesg -r
        f"Nov 29 06:30:54 gpu7 kernel: watchdog: {REPORT}",  # journalctl -k, kern.log
        f"Nov 29 06:30:54 gpu7 kernel: [ 4711.123456] watchdog: {REPORT}",  # rsyslog + stamp
        f"2026-11-29T06:30:54.123456+00:00 gpu7 kernel: watchdog: {REPORT}",  # RFC 3339 syslog
        f"[ 4711.123456] gpu7 kernel: watchdog: {REPORT}",  # journalctl -o short-monotonic
        f"  watchdog: {REPORT}",  # grepped, indented in a paste
    ],
)
def test_a_report_reads_the_same_in_every_coat(line: str) -> None:
    peeled = peel(line)
    assert peeled is not None and peeled.text == f"watchdog: {REPORT}"
    event = event_of(peeled)
    assert event is not None and (event.kind, event.subject) == ("soft_lockup", "CPU#7")


@pytest.mark.parametrize(
    "name",
    [
        "captured-dmesg.txt",
        "captured-dmesg-T.txt",
        "captured-dmesg-x.txt",
        "written-dmesg-healthy-gpu-node.txt",
    ],
)
def test_a_healthy_log_reports_nothing(name: str) -> None:
    facts = pasted(text(name))
    assert [e for e in facts.events if e.kind != "nfs_ok"] == []


def test_a_captured_log_is_recognised_as_one_whole_paste() -> None:
    doc = document("dmesg.txt", text("captured-dmesg.txt").encode(), False)
    assert {r["kind"] for r in doc["probe"]["segments"]} == {"dmesg"}


def test_an_unreadable_log_is_missing_with_why() -> None:
    cap = Capture(
        {
            "probe": {},
            "values": {
                "kernel:log": {
                    "error": {
                        "kind": "failed",
                        "detail": "LookupError: /dev/kmsg: Operation not permitted "
                        "(kernel.dmesg_restrict=1: reading it needs root or CAP_SYSLOG); "
                        "journalctl -k: No journal files were found.",
                    }
                }
            },
        }
    )
    facts = parse_kernel(cap)
    assert isinstance(facts, Missing) and facts.kind == "unreadable"
    assert facts.reason.startswith("the kernel log could not be read: /dev/kmsg: Operation")
    assert "journalctl -k: No journal files" in facts.reason


def test_a_capture_of_an_older_probe_kept_only_xid_lines() -> None:
    old = {
        "argv": ["dmesg"],
        "rc": 0,
        "stdout": "[1.0] NVRM: Xid (PCI:0000:3b:00): 79, x",
        "stderr": "",
    }
    cap = Capture({"probe": {}, "commands": {"kernel:xid": old}})
    assert isinstance(parse_kernel(cap), Missing)
    host = parse_gpu_host(cap)
    assert not isinstance(host.xid, Missing) and [e.code for e in host.xid] == [79]


def test_a_mig_instance_xid_is_read() -> None:
    # src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c documents the form.
    log = "[ 5.0] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel"
    host = parse_gpu_host(Capture(document("paste", log.encode(), False)))
    assert not isinstance(host.xid, Missing)
    assert [(e.bus_id, e.code) for e in host.xid] == [("0000:01:00", 94)]
