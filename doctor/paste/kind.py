"""What a kind of pasted output is, and how the fragments parsed from a paste become one capture."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple


class Kind(NamedTuple):
    """One kind of command output a user may paste.

    ``starts(line)`` says whether a line opens an output of this kind; ``parse(segment)`` turns
    the segment it opened into a raw capture fragment (some of the sections ``files``, ``dirs``,
    ``links``, ``commands``, ``values``), or ``{}`` when the text is not that output after all.
    """

    name: str
    starts: Callable[[str], bool]
    parse: Callable[[str], dict[str, Any]]
    # Its output has lines that begin with "# " (nccl-tests' header and tables): inside it, or
    # where one opens it, such a line is output, not a comment the paster added.
    hash_lines: bool = False
    # Its output is a job's log, where the program's own prints come between its lines: a line
    # another kind (or a prompt) recognises splits it into several segments, which are one
    # output. Everything from its first segment to the end of its last is parsed as one text.
    whole: bool = False
    # A prompt echoing a command this matches (at its start) opens an output of this kind: a
    # job's launch (``$ srun ...``), whose log may open with lines no kind knows.
    command: str = ""


def matcher(*patterns: str) -> Callable[[str], bool]:
    """A ``starts`` that is true when any of the patterns matches at the start of a line."""
    compiled = re.compile("|".join(f"(?:{p})" for p in patterns))
    return lambda line: compiled.match(line) is not None


def merge(into: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge a fragment into a capture document: maps merge, a folder's listed entries
    (``dirs.<path>.entries``) join, anything else is replaced."""
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif key == "entries" and isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = sorted(set(into[key]) | set(value))
        else:
            into[key] = value
    return into


def command(argv: list[str], stdout: str, note: str) -> dict[str, Any]:
    """A command entry as the probe writes one, for output that was pasted rather than run."""
    return {"argv": argv, "rc": 0, "stdout": stdout, "stderr": "", "seconds": 0.0, "pasted": note}
