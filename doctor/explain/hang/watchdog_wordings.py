"""What PyTorch's collective watchdog and its kin print, every wording from torch 1.8 to today,
as the phrase that starts each sentence and what to take from it (hang/watchdog.py reads them).

Read in torch/lib/c10d/ProcessGroupNCCL.cpp (1.8) and torch/csrc/distributed/c10d/ (1.9 on):
ProcessGroupNCCL.cpp at pytorch/pytorch 00f5dfd (1.8), a 1.10-era copy, cf1380d (2.0), 0007e75
(2.2 development) and a later 2.2 copy, a 2.4-era copy, a 2.5-era development snapshot and a
mirror of today's main (cyyever/pytorch 0b10feb: the Watchdog and HeartbeatMonitor classes);
NCCLUtils (the aborted communicator), TraceUtils.h
(the desync report of TORCH_NCCL_DESYNC_DEBUG), ProcessGroupGloo.cpp (monitoredBarrier),
ProcessGroupWrapper.cpp (TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprints) and Gloo's tcp transport
(its strings in torch 2.13's libtorch_cpu.so, and a real capture: tests/explain/hang/
capture_gloo.py). 2.3's dump wordings were read in forks that copy that ProcessGroupNCCL
(torch_npu, torch_mlu), the index holding no 2.3 of PyTorch's own.

A sentence's owner is the bracket just before it: ``[Rank 3]`` (WorkNCCL's, every version),
``[PG 0 Rank 3]`` (2.2-2.3), ``[PG 0 (default_pg) Rank 3]`` (2.4: the group's name and
description), ``[PG ID 0 PG GUID 0(default_pg) Rank 3]`` (2.5 on: its index and global name).
"""

from __future__ import annotations

import re

# A work as every version prints it: WorkNCCL(OpType=X, TensorShape=[..], Timeout(ms)=T) (1.8),
# with SeqNum= first (1.9), NumelIn=/NumelOut= for TensorShape= (2.0 on); ProcessGroupWrapper's
# CollectiveFingerPrint(SequenceNumber=N, OpType=X, ...). A value counts only where its comma or
# closing bracket follows: a line cut in the middle of one gives nothing of it.
FIELD = re.compile(
    r"\b(?P<key>SeqNum|SequenceNumber|OpType|NumelIn|NumelOut|Timeout\(ms\))=(?P<value>\w+)"
    r"(?=[,)])"
)
RAN = re.compile(r" ran for (?P<ran>\d+) milliseconds")
# The group's counts, each read alone: a line cut between them keeps the first.
ENQUEUED = re.compile(r"[Ll]ast enqueued (?:\w+ )?work: (?P<enqueued>-?\d+)")
COMPLETED = re.compile(r"[Ll]ast completed (?:\w+ )?work: (?P<completed>-?\d+)")
AT_WORK = re.compile(r"(?:sequence id|\bat (?:\w+ )?work): (?P<seq>\d+)")
OWNER = re.compile(
    r"\[(?:PG (?:ID )?(?P<pg>[^\s()\[\]]+)(?: PG GUID (?P<guid>[^\s()\[\]]+))?"
    r" ?(?:\((?P<desc>[^()\[\]]*)\))? )?Rank (?P<rank>\d+)\]:?\s*$"
)
OTHER_RANK = ", but Rank "  # ProcessGroupWrapper's second fingerprint is another rank's
_RANKS = r"\d+(?:, \d+)*"

# (kind, a literal part of the phrase, the phrase that starts the sentence, what more to match
# there): named groups rank (the line's own), peers (the other ranks it names), seq, op,
# completed, ms, secs.
WORDINGS: list[tuple[str, str, str, str]] = [
    # The watchdog's timeout (1.8 on) and blocking wait's: "Caught collective operation timeout:"
    # (1.8-1.13), "Work WorkNCCL(...) timed out in blocking wait (NCCL_BLOCKING_WAIT=1)." (2.0 on).
    (
        "timeout",
        "collective operation timeout",
        r"Watchdog caught collective operation timeout: ",
        "",
    ),
    ("timeout", "collective operation timeout", r"Caught collective operation timeout: ", ""),
    ("timeout", "Work Work", r"Work Work\w*\((?=[^\n]{0,600}? timed out in )", ""),
    # The watchdog's failure of a work: 2.6 on; 2.3-2.5; a 2.5-era snapshot's; 2.4 on (an NCCL
    # error on the work); 1.8-2.3; 1.8-1.9; 2.7 on (TORCH_NCCL_PROPAGATE_ERROR: another rank's).
    ("failure", "detected by watchdog", r"failure detected by watchdog at work sequence id: ", ""),
    (
        "failure",
        "detected by watchdog",
        r"Exception \(either an error or timeout\) detected by watchdog at work: ",
        "",
    ),
    ("failure", "detected by watchdog", r"NCCL error is detected by watchdog at work: ", ""),
    (
        "failure",
        "Collective Work",
        r"Collective Work\w*\((?=[^\n]{0,600}?raised the following async exception)",
        "",
    ),
    (
        "failure",
        "found async exception",
        r"found async exception when checking for NCCL errors",
        "",
    ),
    ("failure", "Received NCCL errors", r"Received NCCL errors for communicators in the cache", ""),
    (
        "failure",
        "remote error detected",
        r"remote error detected from rank: ",
        r"[^:]*: (?P<peers>\d+)",
    ),
    # Which work timed out, with the group's counts: 2.3-2.5; the 2.5-era snapshot's.
    ("timeout_at", "Timeout at NCCL work", r"Timeout at NCCL work: ", ""),
    ("timeout_at", "detected by watchdog", r"Work timeout is detected by watchdog at work: ", ""),
    # Flight Recorder's dump signal, from this rank or another (its number: 2.3 on): "Received a
    # global timeout from another rank" (2.2), "a timeout signal" (2.2.x), "a dump signal from this
    # local rank" / "a global dump signal from rank N," (2.3-2.4), "a dump signal due to a
    # collective timeout from this local rank" / "from  rank N" (2.5 on), "Observed ..." (2.4 on).
    (
        "dump",
        "Received a ",
        r"Received a (?:global )?(?:dump|timeout) signal",
        r"(?:[\w ]*? from\s+rank (?P<peers>\d+))?",
    ),
    ("dump", "Received a ", r"Received a global timeout from another rank", ""),
    # ... and the heartbeat monitor's last word before it ends the process (2.2-2.4): "detected a
    # collective timeout and notified current rank", "an exception from the local rank", "a dump
    # signal from rank N and notified the current rank".
    (
        "dump",
        "watchdog detected",
        r"(?:ProcessGroup\w+'s )?watchdog detected (?:a collective timeout|an exception|a dump)",
        r"(?:[\w' ]*? from rank (?P<peers>\d+))?",
    ),
    (
        "dump",
        "flight recorder dump signal",
        r"Observed flight recorder dump signal from another rank",
        "",
    ),
    # The heartbeat monitor (2.2 on): the watchdog itself made no progress.
    ("heartbeat", "Heartbeat monitor timed out", r"Heartbeat monitor timed out", ""),
    (
        "heartbeat",
        "watchdog got stuck",
        r"(?:ProcessGroup\w+'s )?watchdog got stuck for ",
        r"[^\d]*(?P<secs>\d+) sec",
    ),
    ("heartbeat", "monitor thread timeout", r"NCCL monitor thread timeout", ""),
    ("heartbeat", "no heartbeat", r"monitoring thread detects no heartbeat", ""),
    ("heartbeat", "watchdog heartbeat detected", r"No PGNCCL's watchdog heartbeat detected", ""),
    ("heartbeat", "no heartbeat", r"First PG on this rank that detected no heartbeat", ""),
    # The process taken down after a failure (1.8 on), its communicator aborted (NCCLUtils, 1.10
    # on: "NCCL communicator was aborted on rank N. Original reason for failure was: ...").
    ("abort", "have failed or timed out", r"Some NCCL operations have failed or timed out", ""),
    (
        "abort",
        "taking the entire process down",
        r"To avoid data inconsistency, we are taking the entire process down",
        "",
    ),
    (
        "abort",
        "communicator was aborted",
        r"(?:NCCL )?communicator was aborted on rank ",
        r"\D*(?P<rank>\d+)",
    ),
    (
        "abort",
        "watchdog thread terminated",
        r"(?:Process group|NCCL) watchdog thread terminated with exception",
        "",
    ),
    (
        "abort",
        "Terminating the process after",
        r"Terminating the process after attempting to dump debug info",
        "",
    ),
    (
        "abort",
        "is disabled, but would have",
        r"(?:PGNCCL|ProcessGroupNCCL) [Mm]onitor [Tt]hread is disabled, but would have",
        "",
    ),
    # The watchdog's periodic status (2.4 on, where glog has LOG_EVERY_MS).
    ("status", "NCCL Work update periodically", r"NCCL Work update periodically: ", ""),
    # TORCH_NCCL_DESYNC_DEBUG's report (TraceUtils.h, 1.11 on), one line a fact.
    (
        "desync",
        "Timeout at collective",
        r"\[\d+\] Timeout at collective: ",
        r"\[(?P<rank>\d+)\][^:]*: (?P<op>\w+), #(?P<seq>\d+)",
    ),
    (
        "desync",
        "To our best knowledge, ranks",
        r"To our best knowledge, ranks \[",
        rf"[^\[]*\[(?P<peers>{_RANKS})\]",
    ),
    (
        "desync",
        "joined but didn't finish collective",
        rf"\[{_RANKS}\] joined but didn't finish collective #",
        rf"\[(?P<peers>{_RANKS})\][^#]*#(?P<seq>\d+)",
    ),
    (
        "desync",
        "but didn't join collective",
        rf"\[{_RANKS}\] finished collective #\d+, but didn't join collective #",
        rf"\[(?P<peers>{_RANKS})\][^#]*#(?P<completed>\d+)[^#]*#(?P<seq>\d+)",
    ),
    # Gloo's monitoredBarrier (ProcessGroupGloo.cpp), and ProcessGroupWrapper's on top of it.
    (
        "barrier",
        "failed to pass monitoredBarrier",
        rf"Ranks? {_RANKS} failed to pass monitoredBarrier",
        rf"Ranks? (?P<peers>{_RANKS})\D*(?P<ms>\d+) ms",
    ),
    (
        "barrier",
        "timed out in monitoredBarrier",
        r"Rank \d+ timed out in monitoredBarrier",
        r"Rank (?P<rank>\d+)\D*(?P<ms>\d+) ms",
    ),
    (
        "barrier",
        "successfully reached monitoredBarrier",
        r"Rank \d+ successfully reached monitoredBarrier",
        r"Rank (?P<rank>\d+)[^\n]*? from rank (?P<peers>\d+)",
    ),
    (
        "barrier",
        "Monitored Barrier encountered error",
        r"Monitored Barrier encountered error running collective",
        rf"(?:[^\n]*?Ranks? (?P<peers>{_RANKS}) failed to pass)?",
    ),
    (
        "mismatch",
        "Detected mismatch between collectives",
        r"Detected mismatch between collectives on ranks",
        r"[^.]*\. Rank (?P<rank>\d+) is running(?:[^\n]*?, but Rank (?P<peers>\d+) is running)?",
    ),
    # Gloo's tcp transport: a send or recv of a collective waited past the timeout.
    (
        "io_timeout",
        "Timed out waiting",
        r"Timed out waiting \d+ ?ms for (?:recv|send) operation",
        r"\D*(?P<ms>\d+)",
    ),
]

# Substrings one of which every wording holds (each the phrase's own): the callers' cheap test
# before reading a line, and the reader's before trying a phrase.
KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(keyword for _, keyword, _, _ in WORDINGS))
