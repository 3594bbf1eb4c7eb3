"""Horovod's stall warning: the ranks that have not submitted tensors the others wait to reduce.

Horovod's coordinator (rank 0) checks every HOROVOD_STALL_CHECK_TIME_SECONDS (60 s) for tensors
that only some ranks submitted. Its wordings (horovod/common/stall_inspector.cc from 0.18,
common/operations.cc from 0.12, tensorflow/mpi_ops.cc before), each after the same preamble
``One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks
and are waiting for remainder of ranks for more than 60 seconds. This may indicate ... which
will cause deadlock.``:

- 0.20.1 to 0.28.1: ``Missing ranks:`` then one line per rank, ``1: [tensor_a, tensor_b]``
  (global ranks from 0.23); a rank marked ``1!:`` stalled past
  HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, and ``One or more rank (marked by "!") is stalled for
  longer than N seconds. Will shutdown.`` follows. Six names at most, then `` ...`` inside the
  brackets.
- 0.16.2 to 0.20.0: the same under ``Stalled ranks:``.
- 0.13.6 to 0.16.1: ``Stalled ops:`` then per tensor ``tensor_a [missing ranks: 1, 2]`` (from
  0.16.0 each its own log line, the first one glued to ``Stalled ops:``).
- 0.9.0 to 0.13.5: one line, ``Stalled ops: tensor_a [ready ranks: 0, 2], tensor_b [ready
  ranks: 0]``: only the ranks that did submit. A rank is missing a tensor here when it
  submitted another one; a rank that submitted nothing is not seen.

A line ``N: [...]`` loses its rank to an ``srun -l`` label reader (doctor/core/logline.py
peels ``N: ``): give these lines as printed.
"""

from __future__ import annotations

import re

from doctor.explain.hang.absent import MAX_RANK, Absent, kept, names, ranks_in

TOOL = "Horovod's stall inspector"
MAX_LINE = 65536
GAP = 20  # foreign lines a block's lines may have between them (other ranks' output)

PREAMBLE = "submitted to be reduced, gathered or broadcasted by subset of ranks"
OPS = "Stalled ops:"
BLOCK_HEADS = ("Missing ranks:", "Stalled ranks:")
# "1: [a, b, c, d, e, f ...]"; "2!: [a]". The rank follows any wrapping of the line.
RANK_LINE = re.compile(r"(?:^|[\s:>\]])(\d{1,8})(!?): \[([^\[\]]*)\]\s*$")
SHUTDOWN = re.compile(r'One or more rank \(marked by "!"\) is stalled for longer than (\d+)')
# "tensor [missing ranks: 1, 2]" (each its own line, or glued to "Stalled ops:").
MISSING_OP = re.compile(r"(?:Stalled ops:\s*|^|\s|\])([^\s\[\]]+) \[missing ranks:([\d, ]*)\]")
READY_OP = re.compile(r"(?:Stalled ops: |, )([^\[\],]+?) \[ready ranks:([\d, ]*)\]")


class Stall:
    """One warning's ranks and the tensors each has not submitted, as its lines arrive."""

    def __init__(self, line_no: int) -> None:
        self.line_no = line_no
        self.last = line_no
        self.tensors: dict[int, dict[str, None]] = {}  # rank -> tensors it has not submitted
        self.cut: set[int] = set()  # ranks whose list Horovod cut (" ...")
        self.stalled: set[int] = set()  # ranks marked "!"
        self.shutdown = ""
        self.ready_only = False  # the oldest wording: only the ranks that did submit are named

    def missing(self, rank: int, tensors: list[str], line_no: int) -> None:
        if rank < MAX_RANK:
            self.tensors.setdefault(rank, {}).update((t, None) for t in tensors if t)
        self.last = line_no

    def verdicts(self) -> list[Absent]:
        """Ranks missing the same tensors, together, in the order first named."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for rank, tensors in self.tensors.items():
            groups.setdefault(tuple(tensors), []).append(rank)
        out = []
        for listed, ranks in groups.items():
            detail = ""
            if self.stalled & set(ranks):
                stalled = ", ".join(map(str, sorted(self.stalled & set(ranks))))
                detail = f"marked '!' (rank {stalled}): stalled past the shutdown time"
                detail += f" ({self.shutdown} s); Horovod shuts down" if self.shutdown else ""
            if self.ready_only:
                detail = "Horovod named the ready ranks only: one that submitted nothing is unseen"
            cut = bool(self.cut & set(ranks))
            out.append(Absent(tuple(sorted(ranks)), names(list(listed), cut), TOOL,
                              line_no=self.line_no, detail=detail))  # fmt: skip
        return out


def read_horovod(lines: list[str]) -> list[Absent]:
    """Every stall warning's verdicts, in the order printed."""
    found: list[Absent] = []
    stall: Stall | None = None
    listing = False  # inside a "Missing ranks:" block
    for n, raw in enumerate(lines, start=1):
        line = raw[:MAX_LINE].rstrip("\r\n")
        if stall is not None and n - stall.last > GAP:
            found += stall.verdicts()
            stall, listing = None, False
        if stall is None and "ranks:" not in line and PREAMBLE not in line and OPS not in line:
            continue  # most lines of a log: nothing of Horovod's
        if PREAMBLE in line or (stall is None and _starts(line)):
            if stall is not None:
                found += stall.verdicts()
            stall, listing = Stall(n), False
        if stall is None:
            continue
        if line.rstrip().endswith(BLOCK_HEADS):
            listing, stall.last = True, n
        elif listing and (m := RANK_LINE.search(line)) is not None:
            rank, body = int(m[1]), m[3]
            more = body.endswith(" ...")
            stall.missing(rank, [t.strip() for t in body.removesuffix(" ...").split(", ")], n)
            if more:
                stall.cut.add(rank)
            if m[2]:
                stall.stalled.add(rank)
        elif (m := SHUTDOWN.search(line)) is not None:
            stall.shutdown, stall.last = m[1], n
        else:
            _ops(line, n, stall)
    if stall is not None:
        found += stall.verdicts()
    return kept(found)


def _starts(line: str) -> bool:
    """A line that begins a warning whose preamble was cut off (a truncated paste)."""
    return line.rstrip().endswith(BLOCK_HEADS) or "[missing ranks:" in line or OPS in line


def _ops(line: str, n: int, stall: Stall) -> None:
    """The per-tensor wordings (Horovod before 0.16.1)."""
    if "[missing ranks:" in line:
        for tensor, ranks in MISSING_OP.findall(line):
            for rank in ranks_in(ranks):
                stall.missing(rank, [tensor], n)
    elif "[ready ranks:" in line:
        ready = [(t.strip(), set(ranks_in(r))) for t, r in READY_OP.findall(line)]
        seen = set().union(*(r for _, r in ready)) if ready else set()
        for tensor, ranks in ready:
            for rank in sorted(seen - ranks):
                stall.missing(rank, [tensor], n)
        if ready:
            stall.last, stall.ready_only = n, True
