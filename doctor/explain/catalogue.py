"""The signature catalogue: failure messages as data (signatures.json), each signature's regexes
compiled the first time a line is tried against it: a log tries a few of the 79, and compiling
all of them took 7 ms of the 50 ms `doctor explain` of a short log takes.

The catalogue ends with the long tail's readers (issue 45), each built from its emitter's format
strings: every NCCL WARN line by its source file, CUDA and HIP errors by name, Slurm's and the
kernel's words, libfabric, UCX and MPI errors, wrong results, a Python exception; last,
error-looking lines none of them reads (explain.unrecognised). Earlier, more specific signatures
win a line, and a reader marked ``generic`` never stands as the first failure before a specific
one (explanation.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from doctor.core.logline import NOWHERE, Origin
from doctor.core.model import Fix, Severity
from doctor.core.shell import commands
from doctor.explain.hang.watchdog_wordings import KEYWORDS as WAIT_REPORTS
from doctor.explain.stored import document

_FIELDS = (
    "code",
    "severity",
    "source",
    "keywords",
    "patterns",
    "summary",
    "meaning",
    "causes",
    "fix",
    "commands",
    "link",
)


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise its message, what it means and how to fix it."""

    code: str
    severity: Severity
    source: str  # the program that prints it: nccl, pytorch, gloo, openmpi, openssh, any
    keywords: tuple[str, ...]  # literal text, one of which every matching line contains
    expressions: tuple[str, ...]  # the regexes, compiled on first use (patterns)
    summary: str  # a template over the patterns' named groups
    meaning: str
    causes: tuple[str, ...]
    fix: Fix
    link: str
    # What the line is to the job's failure (ROLES): the failure itself, a library's generic word
    # on one (NCCL's result codes), or a process saying that another failed or that it was ended.
    role: str = "cause"
    # Who the line names as at fault, in order (CULPRIT_KINDS): the match's named groups, and
    # "printer", the process that printed it, where no group named anyone. None: ("printer",)
    # for a cause or a restatement, () (no one) for a consequence. A printer no one names is
    # only a reporter.
    culprit: tuple[str, ...] | None = None
    # What NCCL does when two machines collide in its host hash (same hostname and boot_id,
    # or NCCL_HOSTID): the log's evidence of hosts sharing a name is its likely cause.
    identity: bool = False
    # NCCL source files (parts of the path WARN's prefix names: "host:pid:tid [dev]
    # transport/net_ib.cc:123 NCCL WARN ...") whose WARN lines this signature reads, whatever
    # their message: the subsystem, where the message's own words do not say it.
    files: tuple[str, ...] = ()
    # A reader of the long tail: it names the class of a failure no specific signature knows,
    # and is the first failure only where no specific one is in the text.
    generic: bool = False
    # Read only where nothing else is: its hits are left out where any other signature's are.
    fallback: bool = False

    @cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        try:
            return tuple(re.compile(p) for p in self.expressions)
        except re.error as exc:
            raise CatalogueError(f"signature {self.code}: bad pattern: {exc}") from None

    def match(self, message: str, origin: Origin = NOWHERE) -> re.Match[str] | None:
        """The first pattern's match in ``message``; else, for a signature that reads NCCL
        source ``files``, the WARN line's message where the file its prefix named
        (``origin.src``) is one of them. A fallback reader skips a line its logger marked as
        information or a warning (glog's I and W: "[c10d] Failed to bind ..., trying ipv4"),
        and a waiting rank's report that the hang reader reads (a watchdog's timeout, "Ranks 1
        failed to pass monitoredBarrier": hang/watchdog_wordings.py), which is no error of its
        own."""
        if self.fallback and (origin.level in _QUIET or any(k in message for k in WAIT_REPORTS)):
            return None
        for rx in self.patterns:
            m = rx.search(message)
            if m is not None:
                return m
        src = origin.src
        if src and self.files and any(f in src for f in self.files):
            return _WARN.search(message)
        return None

    @property
    def blames(self) -> tuple[str, ...]:
        """The culprit's sources (``culprit``, its default for the role)."""
        if self.culprit is not None:
            return self.culprit
        return () if self.role == "consequence" else (PRINTER,)


# The roles (explanation.tier: how surely a line of each is the job's first failure): a cause; a
# restatement, a generic word on a failure whose cause a more specific line may give (NCCL's
# "unhandled system error", a launcher's "Killed"); a consequence, which says only that another
# process failed or that this one was ended (a watchdog's timeout or abort, a lost peer, a
# launcher's teardown, a time limit after a hang).
ROLES = ("cause", "restatement", "consequence")
# What each culprit group holds: a node as the job named it (a name or an address: srun's node,
# ssh's and the store's host), a rank or srun's task list ("0-3,7"), the other side of a
# connection (an address or a name, with its port as logs write it), a process id or a GPU's
# PCI address ("0000:1b:00"), which the log's own lines may tie to a node and rank (culprit.py);
# and the printer, which is no group: the process whose line it is (its label, NCCL's prefix).
PRINTER = "printer"
CULPRIT_KINDS = {"node": "node", "host": "node", "rank": "rank", "tasks": "rank", "peer": "peer",
                 "addr": "peer", "pid": "pid", "pci": "gpu", PRINTER: PRINTER}  # fmt: skip

_QUIET = ("I", "W")
_WARN = re.compile(r"\b[NR]CCL WARN (?P<msg>[^\n]{0,300})")


class CatalogueError(ValueError):
    """signatures.json is malformed; the message names the entry."""


def _signature(entry: dict[str, Any]) -> Signature:
    code = entry.get("code", "?")
    missing = [f for f in _FIELDS if f not in entry]
    if missing:
        raise CatalogueError(f"signature {code}: missing {', '.join(missing)}")
    return Signature(
        code=code,
        severity=Severity.parse(entry["severity"]),
        source=entry["source"],
        keywords=tuple(entry["keywords"]),
        expressions=tuple(entry["patterns"]),
        summary=entry["summary"],
        meaning=entry["meaning"],
        causes=tuple(entry["causes"]),
        fix=Fix(entry["fix"], commands(*entry["commands"])),
        link=entry["link"],
        role=_role(entry),
        culprit=_culprit(entry),
        identity=bool(entry.get("identity", False)),
        files=tuple(entry.get("files", ())),
        generic=bool(entry.get("generic", False) or entry.get("fallback", False)),
        fallback=bool(entry.get("fallback", False)),
    )


def _role(entry: dict[str, Any]) -> str:
    role = entry.get("role", "cause")
    if role not in ROLES:
        code = entry.get("code", "?")
        raise CatalogueError(f"signature {code}: role {role!r} is not one of {', '.join(ROLES)}")
    return str(role)


def _culprit(entry: dict[str, Any]) -> tuple[str, ...] | None:
    groups = entry.get("culprit")
    if groups is None:
        return None
    wrong = [g for g in groups if g not in CULPRIT_KINDS]
    if wrong:
        code = entry.get("code", "?")
        kinds = ", ".join(CULPRIT_KINDS)
        raise CatalogueError(f"signature {code}: culprit group {wrong[0]!r} is not one of {kinds}")
    return tuple(groups)


def parse_catalogue(text: str) -> tuple[Signature, ...]:
    """Signatures from the JSON text, in file order (earlier, more specific ones win a line),
    their regexes compiled now: a bad one is named here."""
    signatures = _signatures(json.loads(text))
    for signature in signatures:
        named = {g for p in signature.patterns for g in p.groupindex}
        lost = [g for g in signature.culprit or () if g not in named and g != PRINTER]
        if lost:
            raise CatalogueError(
                f"signature {signature.code}: no pattern has culprit group {lost[0]}"
            )
    return signatures


def _signatures(document: dict[str, Any]) -> tuple[Signature, ...]:
    signatures = tuple(_signature(e) for e in document["signatures"])
    codes = [s.code for s in signatures]
    duplicates = sorted({c for c in codes if codes.count(c) > 1})
    if duplicates:
        raise CatalogueError(f"duplicate signature codes: {', '.join(duplicates)}")
    return signatures


@cache
def catalogue() -> tuple[Signature, ...]:
    """The shipped catalogue."""
    return _signatures(document())
