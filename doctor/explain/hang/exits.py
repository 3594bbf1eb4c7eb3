"""The launcher's word on the rank that ended first, read from a job's text after its hang.

- torchrun's ChildFailedError: its "Root Cause (first observed failure):" entry, ``rank : 2
  (local_rank: 2)``, ``host : node3``, ``exitcode : -9 (pid: 1388)`` (a negative code is the
  signal; torch/distributed/elastic/multiprocessing/errors/__init__.py formats it);
- Open MPI: ``mpirun noticed that process rank 2 with PID 0 on node node3 exited on signal 9
  (Killed).`` (``prterun`` in Open MPI 5);
- Slurm: ``srun: error: node3: task 2: Killed`` (``tasks 0-1,3:`` for several).

Only an end no collective's failure brings counts: a kill or a crash (SIGKILL, SIGSEGV, SIGBUS,
SIGILL, SIGFPE). A rank that only waited ends by its watchdog's SIGABRT, by the exception its
failed collective raised (exit code 1), or by its launcher's SIGTERM once another rank ended:
what the hang did, not its cause. Each launcher's report is what a real run printed (the H100's
torchrun jobs, tests/fixtures/gpu/h100/ended-*; mpirun and srun on the test bed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.core.logline import strip_prefixes
from doctor.core.nodeset import numbers

# Signals no collective's failure sends: the OOM killer, a scheduler, kill -9; a native crash.
ENDS = {9: "SIGKILL", 11: "SIGSEGV", 7: "SIGBUS", 4: "SIGILL", 8: "SIGFPE"}
# Their names as strsignal() words them, which srun ("(core dumped)" or not) and faulthandler
# ("Fatal Python error: Segmentation fault") print.
NAMED = {"Killed": 9, "Segmentation fault": 11, "Bus error": 7, "Illegal instruction": 4,
             "Floating point exception": 8}  # fmt: skip

ROOT = "Root Cause (first observed failure)"
FIELD = re.compile(
    r"^\s*(rank|host|exitcode|time|error_file|traceback)\s*:\s*(-?\d+|\S+)(?:\s*\(pid:\s*(\d+)\))?"
)
ENTRY_START = re.compile(r"^\s*\[\d+\]:\s*$")
MPI = re.compile(
    r"(?:mpirun|prterun|orterun|mpiexec) noticed that process rank (\d+) with PID (\d+) on node "
    r"(\S+) exited on signal (\d+)"
)
SRUN = re.compile(r"srun: error: ([\w.-]+): tasks? ([\d,-]+): (.+?)\s*$")
NOT_A_NODE = ("", "localhost", "?")
MAX_TASKS = 4096  # tasks one srun line may name that are read
ENTRY = 40  # lines after a root cause its entry's fields may be among (8, interleaved)


@dataclass(frozen=True)
class Exit:
    """A rank its launcher saw end by a kill or a crash."""

    rank: int
    node: str  # "" where the report does not name one
    pid: int  # 0 where not said (Open MPI run on one machine here printed "PID 0")
    signal: str  # "SIGKILL"
    launcher: str  # "torchrun", "mpirun", "srun"

    def describe(self) -> str:
        pid = f", pid {self.pid}" if self.pid else ""
        return f"ended by {self.signal} ({self.launcher}'s report{pid})"


def read_exits(lines: Iterable[str]) -> list[Exit]:
    """Every launcher's first kill or crash, in the order printed, each rank once. A torchrun
    entry's lines are gathered per writer (srun -l's task label, a log collector's host), so two
    agents printing at once into one stream are not read as one entry. Every line given is
    peeled: a large log's caller gives the lines around the reports' words alone (written.py:
    a root cause and the ENTRY lines after it)."""
    found: dict[int, Exit] = {}
    entries: dict[tuple[object, ...], dict[str, tuple[str, str | None]]] = {}
    for line in lines:
        message, origin = strip_prefixes(line)
        writer = (origin.rank, origin.host, origin.via)
        entry = entries.get(writer)
        if entry is not None:
            field = FIELD.match(message)
            if field:
                entry[field.group(1)] = (field.group(2), field.group(3))
                continue
            if not entry and ENTRY_START.match(message):
                continue
            _torchrun(entries.pop(writer), found)
        if ROOT in message:
            entries[writer] = {}
        elif mpi := MPI.search(message):
            rank, pid, node, number = mpi.groups()
            _keep(found, int(rank), node, int(pid), "mpirun", int(number))
        elif srun := SRUN.search(message):
            number = NAMED.get(srun.group(3).removesuffix(" (core dumped)"))
            for rank in numbers(srun.group(2), MAX_TASKS) if number else ():
                _keep(found, rank, srun.group(1), 0, "srun", number or 0)
    for entry in entries.values():
        _torchrun(entry, found)
    return list(found.values())


def _torchrun(entry: dict[str, tuple[str, str | None]], found: dict[int, Exit]) -> None:
    rank, code = entry.get("rank", ("", None))[0], entry.get("exitcode", ("", None))
    if rank.isdigit() and code[0].lstrip("-").isdigit() and int(code[0]) < 0:
        pid = int(code[1]) if code[1] else 0
        host = entry.get("host", ("", None))[0]
        _keep(found, int(rank), host, pid, "torchrun", -int(code[0]))


def _keep(found: dict[int, Exit], rank: int, node: str, pid: int, by: str, signal: int) -> None:
    if signal in ENDS and rank not in found:
        found[rank] = Exit(rank, "" if node in NOT_A_NODE else node, pid, ENDS[signal], by)
