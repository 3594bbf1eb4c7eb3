"""What PyTorch's Flight Recorder analyzer (``torchfrtrace``, ``python -m
torch.distributed.flight_recorder.fr_trace``) printed about ranks that did not join a collective.

The analyzer matches every rank's dump entry by entry and logs, one field a line, each
collective it cannot match (torch/distributed/flight_recorder/components/utils.py error_analysis
and types.py EntryState.log in torch 2.13; tools/flight_recorder/components/builder.py before
torch 2.7). Its wordings:

- torch >= 2.6: ``Not all ranks joining collective, sequence number: 4`` then ``internal record
  id``, ``group info: 0:default_pg``, ``collective: nccl:all_reduce``, ``missing ranks: {1}``,
  ``world size: 2``, ``expected ranks: {0, 1}``; ``Collective sequence number: 4 has errors``
  with ``error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, ...``.
- torch 2.5: ``Not all ranks joining collective 4 at entry 3``, the same fields but
  ``expected ranks: 2`` (a count); ``Collective 4 at entry 3 errors`` with ``error message:``.
- torch 2.4 (printed, not logged): ``Not all ranks joining collective for group 0:default_pg
  collective nccl:all_reduce  Missing ranks are {1}``; ``Collective 3 errors for group ...
  collective ...`` then ``Found errors: Error rank 1, MatchState.COLLECTIVE_TYPE_MISMATCH``.
- Ranks without a dump: ``Missing dump files from ranks {1}`` (the analyzer stops), or with
  ``--allow-incomplete-ranks``: ``... because we missed FR dumps from ranks ({1}) ...``.

A culprit of a mismatch called something else at that step: it did not join this collective
either (the analyzer warns that the first rank it reads may be the culprit instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.explain.hang.absent import Absent, kept, ranks_in

TOOL = "torchfrtrace"
MAX_LINE = 4096  # characters of a line read
BLOCK_LINES = 60  # lines a verdict's fields may follow its first one (foreign lines between)

HEADS = [
    ("missing", re.compile(r"Not all ranks joining collective, sequence number: (?P<seq>-?\d+)")),
    ("missing", re.compile(r"Not all ranks joining collective (?P<seq>-?\d+) at entry \d+")),
    (
        "missing",
        re.compile(
            r"Not all ranks joining collective for group (?P<group>.+?) collective "
            r"(?P<op>\S+)\s+Missing ranks are (?P<ranks>\{[^}]*\}|set\(\))"
            r"(?:.*?\]\s+(?P<world>\d+)\s+[a-z]+\s*$)?"
        ),
    ),
    ("errors", re.compile(r"Collective sequence number: (?P<seq>-?\d+) has errors")),
    ("errors", re.compile(r"Collective (?P<seq>-?\d+) at entry \d+ errors")),
    (
        "errors",
        re.compile(
            r"Collective \d+ errors for group (?P<group>.+?) collective (?P<op>\S+)"
            r"(?:.*?\]\s+(?P<world>\d+)\s+[a-z]+\s*$)?"
        ),
    ),
    ("sizes", re.compile(r"Input/output mismatch in the collective")),
]
FIELDS = {
    "group": re.compile(r"(?:^|\W)group info: (?P<v>\S+)"),
    "op": re.compile(r"(?:^|\W)collective: (?P<v>\S+)\s*$"),
    "ranks": re.compile(r"(?:^|\W)missing ranks: (?P<v>\{[^}]*\}|set\(\))"),
    "world": re.compile(r"(?:^|\W)world size: (?P<v>\d+)"),
    "expected": re.compile(r"(?:^|\W)expected ranks: (?P<v>.+)"),
    "errors": re.compile(r"(?:^|\W)(?:error msg|error message|Found errors): (?P<v>.+)"),
}
CULPRIT = re.compile(r"(?:Culprit|Error) rank (\d+)")
# What a field keeps where a reader of journald's "TIME host prog: " took "missing ranks: " for
# a host and a program (doctor/core/logline.py on a time-stamped line): a bare set, the
# culprits' sentence. The analyzer prints missing ranks before expected ranks.
BARE_SET = re.compile(r"^\s*(?P<v>\{[\d, ]*\}|set\(\))\s*$")
BARE_ERRORS = re.compile(r"(?P<v>(?:Culprit|Error) rank \d+[;,].*)")
NO_DUMP = [
    re.compile(r"Missing dump files from ranks (?P<ranks>\{[^}]*\})"),
    re.compile(r"missed FR dumps from ranks \((?P<ranks>[^)]*)\)"),
]


@dataclass
class Block:
    """One verdict as its fields arrive."""

    kind: str  # "missing", "errors", "sizes"
    line_no: int
    last: int  # the line of its latest field
    seen: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, value: str, line_no: int) -> None:
        self.seen.setdefault(name, value)
        self.last = line_no

    def read(self, line: str, line_no: int) -> None:
        for name, pattern in FIELDS.items():
            if (m := pattern.search(line)) is not None:
                self.add(name, m["v"], line_no)
                return
        if (m := BARE_SET.match(line)) is not None:
            wanted = "ranks" if self.kind == "missing" and "ranks" not in self.seen else "expected"
            self.add(wanted, m["v"], line_no)
        elif self.kind == "errors" and (m := BARE_ERRORS.search(line)) is not None:
            self.add("errors", m["v"], line_no)

    def verdict(self) -> Absent | None:
        seen = self.seen
        if self.kind == "missing":
            ranks, detail = ranks_in(seen.get("ranks", "")), ""
        elif self.kind == "errors":
            said = seen.get("errors", "")
            ranks, detail = tuple(sorted({int(r) for r in CULPRIT.findall(said)})), said[:500]
        else:
            return None
        expected = seen.get("world") or seen.get("expected", "")
        count = int(expected) if expected.strip().isdigit() else len(ranks_in(expected)) or None
        return Absent(
            ranks=ranks,
            collective=describe(seen.get("op", ""), seen.get("seq", ""), seen.get("group", "")),
            tool=TOOL,
            expected=count,
            line_no=self.line_no,
            detail=detail,
        )


def describe(op: str, seq: str, group: str) -> str:
    """``all_reduce #4 of process group 0 (default_pg)`` from what the analyzer printed."""
    name = op.split(":", 1)[-1] or "collective"
    if seq:
        name += f" #{seq}"
    if group:
        pg, _, desc = group.partition(":")
        name += f" of process group {pg}" + (f" ({desc})" if desc else "")
    return name


def read_frtrace(lines: list[str]) -> list[Absent]:
    """Every verdict the analyzer printed that names ranks, in the order printed."""
    found: list[Absent] = []
    block: Block | None = None
    for n, raw in enumerate(lines, start=1):
        line = raw[:MAX_LINE].rstrip("\r\n")
        if block is not None and n - block.last > BLOCK_LINES:
            _close(block, found)
            block = None
        head = _head(line, n)
        if head is not None:
            _close(block, found)
            block = head
            continue
        for pattern in NO_DUMP:
            if (m := pattern.search(line)) is not None:
                detail = "no Flight Recorder dump from these ranks"
                found.append(Absent(ranks_in(m["ranks"]), "", TOOL, line_no=n, detail=detail))
        if block is not None:
            block.read(line, n)
    _close(block, found)
    return kept(found)


def _head(line: str, n: int) -> Block | None:
    if "ollective" not in line:
        return None
    for kind, pattern in HEADS:
        if (m := pattern.search(line)) is not None:
            block = Block(kind, n, n)
            for name, value in m.groupdict().items():
                if value is not None:
                    block.add(name, value, n)
            return block
    return None


def _close(block: Block | None, found: list[Absent]) -> None:
    verdict = block.verdict() if block is not None else None
    if verdict is not None:
        found.append(verdict)
