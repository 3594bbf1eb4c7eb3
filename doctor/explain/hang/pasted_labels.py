"""What wraps a pasted line beyond the peeling layer's reach: pdsh's ``host: `` (clush's too) and
srun -l's ``N: `` before an indented line (the layer takes srun's label only before a word), and
an issue reply's ``> `` quote. A ``name: `` is a label once it stood before a line only a dump
holds (a py-spy local's ``name: value`` never does): from then on, before any line.
"""

from __future__ import annotations

import re

from doctor.explain.hang import pasted_frames as pf
from doctor.explain.hang.pasted_json import START
from doctor.explain.hang.pasted_ps import table_header
from doctor.explain.prefix import Origin, strip_prefixes

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
    return bool(frame and frame.group(3)) or bool(START.fullmatch(text)) or bool(table_header(text))


def _over(inner: Origin, outer: Origin) -> Origin:
    """What a wrapping inside the line says, over what the outer one said."""
    return outer._replace(
        host=inner.host or outer.host,
        rank=inner.rank if inner.rank is not None else outer.rank,
        pid=inner.pid or outer.pid,
    )
