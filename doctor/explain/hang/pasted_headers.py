"""What users write around pasted dumps to say whose they are, and what a command line says.

- headers between dumps: ``==> node3/rank5.txt <==`` (tail and head), banners (``=== node2
  rank 5 ===``, ``--- node2 pid 4242 ---``, ``## rank 3``), a short line ending in a colon
  (``rank 3:``, ``host node2:``), a shell prompt with its command (``[node2] $ py-spy dump --pid
  123``, ``user@node2:~$ pystack remote 123``);
- a command line's rank: ``RANK=3``, ``--local_rank=3``/``--local-rank 3``, ``WORLD_SIZE=4``;
- what wraps a line beyond the peeling layer's reach: pdsh's ``host: `` (clush's too) and srun
  -l's ``N: `` before an indented line (the layer takes srun's label only before a word), an
  issue reply's ``> `` quote. A ``name: `` is a label once it stood before a line only a dump
  holds (a py-spy local's ``name: value`` never does): from then on, before any line.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from doctor.core.logline import Origin, strip_prefixes
from doctor.explain.hang import pasted_frames as pf
from doctor.explain.hang.pasted_ps import table_header


class Said(NamedTuple):
    """Whose the lines below a header are, as far as it tells."""

    host: str = ""
    rank: int | None = None
    local_rank: int | None = None
    world: int | None = None
    pid: int = 0

    def over(self, base: Said) -> Said:
        """These fields where given, ``base``'s elsewhere."""
        return Said(
            self.host or base.host,
            self.rank if self.rank is not None else base.rank,
            self.local_rank if self.local_rank is not None else base.local_rank,
            self.world if self.world is not None else base.world,
            self.pid or base.pid,
        )

    def env(self) -> dict[str, str]:
        pairs = (("RANK", self.rank), ("LOCAL_RANK", self.local_rank), ("WORLD_SIZE", self.world))
        return {name: str(value) for name, value in pairs if value is not None}


_TAIL = re.compile(r"==> (.+?) <==")
_BANNER = re.compile(r"([=#*~+-])\1{2,}\s*(.+?)\s*[=#*~+-]*")
_MARKDOWN = re.compile(r"#{1,6}\s+(.+)")
_COLON = re.compile(r"([^:]{1,80}):")
# A shell prompt: "[user@host dir]$ ", "user@host:~$ ", "host$ ", "(venv) $ ", "# ".
_PROMPT = re.compile(
    r"(?:\([^)]*\)\s*)?(?:\[(?:[\w.-]+@)?(?P<h1>[\w.-]+)[^\]]*\]|(?:[\w.-]+@)?(?P<h2>[\w.-]+)"
    r"(?::\S*)?)?\s*[$#%] (?P<cmd>\S.*)"
)
_STACK_WORDS = re.compile(r"(?:Thread|Process|Traceback|Current|Stack|Locals|Arguments|File)\b")
_LOCAL = re.compile(r"(?i)(?<![\w-])local[_ -]?rank\s*[=:#]?\s*(\d+)")
_WORLD = re.compile(
    r"(?i)(?<![\w-])world[_ -]?size\s*[=:]?\s*(\d+)"
    r"|(?<![\w-])rank\s*[=:#]?\s*\d+\s*(?:/|of)\s*(\d+)"  # rank 3/8, rank 3 of 8
)
_RANK = re.compile(r"(?i)(?<![\w-])(?:global[_ -]?)?rank[_ -]?\s*[=:#]?\s*(\d+)")
_PID = re.compile(r"(?i)(?<![\w-])pid\s*[=:#]?\s*(\d+)")
_COMMAND_PID = re.compile(r"(?:--pid[= ]|\s-p ?)(\d+)(?![\d,])|\bremote\s+(?:-\S+\s+)*(\d+)\b")
_HOST_WORD = re.compile(r"(?i)(?<![\w-])(?:host(?:name)?|node)\s*[=:]?\s+([A-Za-z][\w.-]*)")
# A host's name: letters then a number somewhere (node3, gpu-node-017, ip-10-0-0-1), or an IP.
_HOST = re.compile(r"[A-Za-z][A-Za-z0-9-]*\d[A-Za-z0-9.-]*|\d{1,3}(?:\.\d{1,3}){3}")
_NOT_HOST = re.compile(r"(?i)(?:rank|pid|ppid|tid|local|world|thread|process|python|pypy|cuda|v)\d")
_EXTENSION = re.compile(r"\.(?:txt|log|out|err|json|py|md)$")
_ARGV = (
    ("RANK", re.compile(r"(?<!\S)RANK=(\d+)(?!\S)")),
    ("LOCAL_RANK", re.compile(r"(?<!\S)(?:LOCAL_RANK=|--local[_-]rank[= ])(\d+)(?!\S)")),
    ("WORLD_SIZE", re.compile(r"(?<!\S)WORLD_SIZE=(\d+)(?!\S)")),
)


def _fields(text: str) -> Said:
    local = _LOCAL.search(text)
    rest = _LOCAL.sub(" ", text)
    world = _WORLD.search(rest)
    rank = _RANK.search(rest)
    pid = _PID.search(rest)
    return Said(
        host=_host(rest),
        rank=int(rank.group(1)) if rank else None,
        local_rank=int(local.group(1)) if local else None,
        world=int(world.group(1) or world.group(2)) if world else None,
        pid=int(pid.group(1)) if pid else 0,
    )


def _host(text: str) -> str:
    named = _HOST_WORD.search(text)
    if named and not _NOT_HOST.match(named.group(1)):
        return _EXTENSION.sub("", named.group(1))
    for word in re.split(r"[\s/\\:,()\[\]<>'\"]+", text):
        word = _EXTENSION.sub("", word.strip(".-"))
        if _HOST.fullmatch(word) and not _NOT_HOST.match(word):
            return word
    return ""


def read_header(text: str) -> tuple[Said, bool] | None:
    """What a header line says, and whether it is a shell prompt (which may only add to the
    header above it); None for a line that is no header."""
    prompt = _PROMPT.fullmatch(text)
    if prompt and not _MARKDOWN.fullmatch(text):
        command = prompt["cmd"]
        pid = _COMMAND_PID.search(command)
        fields = _fields(command)._replace(host=prompt["h1"] or prompt["h2"] or "")
        if pid:
            fields = fields._replace(pid=int(pid.group(1) or pid.group(2)))
        return fields, True
    found = _TAIL.fullmatch(text) or _BANNER.fullmatch(text) or _MARKDOWN.fullmatch(text)
    inner = found.group(found.lastindex or 1) if found else None
    if inner is None and (colon := _COLON.fullmatch(text)) and len(text.split()) <= 8:
        inner = None if _STACK_WORDS.match(text) else colon.group(1)
    if not inner:
        return None
    fields = _fields(inner)
    return (fields, False) if fields != Said() else None


def argv_env(argv: tuple[str, ...]) -> dict[str, str]:
    """The rank a command line gives: a wrapper's ``RANK=3`` and ``WORLD_SIZE=4``,
    torch.distributed.launch's ``--local_rank=3`` (a script's own ``--rank`` may mean anything)."""
    line = " ".join(argv)
    return {name: m.group(1) for name, pattern in _ARGV if (m := pattern.search(line))}


# pdsh, clush: "host: "; srun -l: "3: ". A label is no more than a host's name.
LABEL = re.compile(r"([A-Za-z0-9][\w.-]{0,63}): (.*)")
QUOTE = re.compile(r"^(?:>[ \t]?)+")
MAX_LABELS = 4096
_DUMP_LINES = (
    pf.PYSPY_PROCESS,
    pf.PYSPY_THREAD,
    pf.FAULT_THREAD,
    pf.FAULT_FRAME,
    pf.PYSTACK_THREAD,
    pf.PYSTACK_FRAME,
    pf.GDB_THREAD,
)


class Labels:
    def __init__(self) -> None:
        self.known: set[str] = set()

    def peel(self, origin: Origin, message: str) -> tuple[str, Origin]:
        """The message without its quote and label, and the origin with what the label says
        (over what the caller knew of the whole paste: the label is the line's own)."""
        if message.startswith(">"):
            message, quoted = strip_prefixes(QUOTE.sub("", message))
            origin = _over(quoted, origin)
        m = LABEL.fullmatch(message.strip())
        if m is None:
            return message, origin
        label, rest = m.groups()
        if label not in self.known:
            if not dump_line(rest.strip()) or len(self.known) >= MAX_LABELS:
                return message, origin
            self.known.add(label)
        text, more = strip_prefixes(rest)
        said = Origin(rank=int(label)) if label.isdigit() else Origin(host=label)
        return text, _over(more, _over(said, origin))


def dump_line(text: str) -> bool:
    """A line only a dump holds: a tool's header or frame, a JSON dump's start, a ps header."""
    if any(p.fullmatch(text) for p in _DUMP_LINES) or text in (pf.TRACEBACK, pf.TRACEBACK_FIRST):
        return True
    frame = pf.PYSPY_FRAME.fullmatch(text)
    return (
        bool(frame and frame.group(3)) or bool(pf.START.fullmatch(text)) or bool(table_header(text))
    )


def _over(inner: Origin, outer: Origin) -> Origin:
    """What a wrapping inside the line says, over what the outer one said."""
    return outer._replace(
        host=inner.host or outer.host,
        rank=inner.rank if inner.rank is not None else outer.rank,
        pid=inner.pid or outer.pid,
    )
