"""The signature catalogue: failure messages as data (signatures.json), each signature's regexes
compiled the first time a line is tried against it: a log tries a few of the 79, and compiling
all of them took 7 ms of the 50 ms `doctor explain` of a short log takes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

from doctor.core.model import Fix, Severity
from doctor.core.shell import commands
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
    secondary: bool = False  # usually the consequence of an earlier failure elsewhere
    # What NCCL does when two machines collide in its host hash (same hostname and boot_id,
    # or NCCL_HOSTID): the log's evidence of hosts sharing a name is its likely cause.
    identity: bool = False

    @cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        try:
            return tuple(re.compile(p) for p in self.expressions)
        except re.error as exc:
            raise CatalogueError(f"signature {self.code}: bad pattern: {exc}") from None

    def match(self, message: str) -> re.Match[str] | None:
        for rx in self.patterns:
            m = rx.search(message)
            if m is not None:
                return m
        return None


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
        secondary=bool(entry.get("secondary", False)),
        identity=bool(entry.get("identity", False)),
    )


def parse_catalogue(text: str) -> tuple[Signature, ...]:
    """Signatures from the JSON text, in file order (earlier, more specific ones win a line),
    their regexes compiled now: a bad one is named here."""
    signatures = _signatures(json.loads(text))
    for signature in signatures:
        _ = signature.patterns
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
