"""Pasted process tables: ``ps`` (any ``-o`` list, ``aux``, ``-ef``, ``-eLf``, ``-l``) and
``top -b``, read by their header's column names as procps-ng's ps and top print them (ps(1)'s
STANDARD FORMAT SPECIFIERS; the captures in tests/fixtures/logs/hang/pasted): PID, PPID,
LWP/SPID/TID, STAT/S/STATE, WCHAN, and the command (COMMAND/CMD/ARGS/COMM) when it is the last
column (it holds spaces). Every other column is a single word in these tools'
default formats, so a row splits on white space.
"""

from __future__ import annotations

import re
from typing import NamedTuple

COLUMNS = {
    "PID": "pid",
    "PPID": "ppid",
    "LWP": "lwp",
    "SPID": "lwp",
    "TID": "lwp",
    "STAT": "state",
    "S": "state",
    "STATE": "state",
    "WCHAN": "wchan",
    "COMMAND": "cmd",
    "CMD": "cmd",
    "ARGS": "cmd",
    "COMM": "cmd",
    "UCMD": "cmd",
    "UCOMM": "cmd",
}
_HEADER_WORD = re.compile(r"[A-Z%+_:0-9-]+")
# ps's process state codes and its BSD flags (<, N, L, s, l, +).
_STATE = re.compile(r"[RSDTtZXIWKP][<NLsl+]*")
# --forest draws the tree before the command: "\_ ", "|   \_ ".
_FOREST = re.compile(r"^(?:\|\s+|\\_\s+)+")


class Row(NamedTuple):
    pid: int
    ppid: int | None
    lwp: int | None
    state: str  # one letter, "" where the table has no state column
    wchan: str
    argv: tuple[str, ...]


class Table(NamedTuple):
    """A header's columns: each column's field name ("" for those not read)."""

    fields: tuple[str, ...]

    @property
    def rest_is_command(self) -> bool:
        return self.fields[-1] == "cmd"


def table_header(text: str) -> Table | None:
    words = text.split()
    if len(words) < 2 or "PID" not in words or not all(_HEADER_WORD.fullmatch(w) for w in words):
        return None
    fields = tuple(COLUMNS.get(w, "") for w in words)
    return Table(fields) if {"state", "cmd", "wchan", "ppid"} & set(fields) else None


def table_row(table: Table, text: str) -> Row | None:
    count = len(table.fields)
    words = text.split(None, count - 1) if table.rest_is_command else text.split()
    if len(words) != count:
        return None
    values = dict(zip(table.fields, words, strict=True))
    values.pop("", None)
    state = values.get("state", "")
    if not values["pid"].isdigit() or (state and not _STATE.fullmatch(state)):
        return None
    ppid, lwp = values.get("ppid", ""), values.get("lwp", "")
    if (ppid and not ppid.isdigit()) or (lwp and not lwp.isdigit()):
        return None
    wchan = values.get("wchan", "")
    return Row(
        pid=int(values["pid"]),
        ppid=int(ppid) if ppid else None,
        lwp=int(lwp) if lwp else None,
        state=state[:1],
        wchan="" if wchan == "-" else wchan,
        argv=tuple(_FOREST.sub("", values.get("cmd", ""), count=1).split()),
    )
