"""Pasted stack dumps and process tables (what a user pastes into an issue after a hang) read into
the processes ``doctor stacks`` builds when it looks itself (doctor/facts/hang/stacks.py), so one
model groups both: py-spy dump (text, ``--json``, ``--native``, ``--locals``,
``--subprocesses``, ``--core``), pystack (remote, core), faulthandler, Python tracebacks, and
``ps``/``top`` tables for the processes' states (the lines: hang/pasted_frames.py,
pasted_ps.py; what users and collectors write around them: pasted_headers.py; from what was
read to processes: pasted_processes.py).

Lines come unwrapped by the peeling layer, each with its origin (and by pasted_headers.py of
what it leaves: pdsh's labels, quotes); a paste of several hosts mixed (pdsh) is read as one stream
per origin, each with its own state. Within a stream a process ends
where another begins: a header, py-spy's ``Process``, a thread id seen twice, a faulthandler
thread not preceded by its dump's empty line, a new traceback. A header's rank and pid go to the
first process below it (and to that process's children), its host to all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from doctor.core.logline import Origin
from doctor.explain.hang import pasted_frames as pf
from doctor.explain.hang.pasted_headers import Labels, Said, read_header
from doctor.explain.hang.pasted_processes import Dump, Rows, processes
from doctor.explain.hang.pasted_ps import Table, table_header, table_row
from doctor.explain.hang.watchdog import KEYWORDS as WATCHDOG_KEYWORDS
from doctor.explain.hang.watchdog import read_watchdog
from doctor.facts.hang.stacks import Frame, JobProcess, Thread, _threads

# At least one of these is in any text read into a process (the caller's cheap pre-filter):
# py-spy's thread and process headers, faulthandler's and pystack's thread headers, a
# traceback's, --json's frames, a process table's header, a pystack core's information.
KEYWORDS = (
    "Thread ",
    "thread ",
    "Process ",
    "most recent call",
    '"frames"',
    "PID",
    "Core file information",
)
MAX_FRAMES = 512  # a thread's, the innermost kept (recursion repeats)
MAX_LINE = 1 << 16  # longer lines are no dump's (a C++ symbol runs to a few thousand)
GAP = 3  # lines a frame of a traceback, pystack or py-bt may have below it (source, carets)


@dataclass
class _Draft:
    """A thread being read."""

    tool: str
    tid: int
    name: str
    active: bool
    outer_first: bool
    chain: bool = False  # a chained traceback's: its outer frames complete the first one
    frames: list[Frame] = field(default_factory=list)


@dataclass
class _Stream:
    base: Said  # what the origin says
    said: Said  # what the header above says (over the origin)
    claimed: bool = False  # the header's rank and pid went to a process already
    dump: Dump | None = None
    draft: _Draft | None = None
    last: str = ""  # what the line before was: "thread", "frame", "local", "blank", ...
    gap: int = 0
    locals: bool = False
    chained: bool = False
    thread_name: str = ""  # "Exception in thread NAME:" names the traceback below
    json: pf.JsonBlock | None = None
    table: Table | None = None
    crash: str = ""  # faulthandler's fatal signal, for the dump it begins


class _Reader:
    def __init__(self) -> None:
        self.streams: dict[tuple[object, ...], _Stream] = {}
        self.labels = Labels()
        self.dumps: list[Dump] = []
        self.rows: Rows = []
        self.named: set[tuple[str, int]] = set()
        self.count = 0  # lines read: a process's place is where its dump began

    def feed(self, origin: Origin, message: str) -> None:
        self.count += 1
        if len(message) > MAX_LINE:
            message = ""  # read as a line that says nothing: it ends a thread
        text, origin = self.labels.peel(origin, message)
        key = (origin.host, origin.rank, origin.pid, origin.via)
        stream = self.streams.get(key)
        if stream is None:
            base = Said(host=origin.host or origin.via or "", rank=origin.rank, pid=origin.pid or 0)
            stream = self.streams[key] = _Stream(base, base)
        if "\0" in text:  # a core's psargs, padded with NULs
            text = text.replace("\0", " ")
        self._line(stream, text.strip())

    def _line(self, s: _Stream, text: str) -> None:
        if s.json is not None:
            if s.json.feed(text):
                if s.json.closed:
                    self._json(s)
                return
            s.json = None
        if s.table is not None and (row := table_row(s.table, text)) is not None:
            self.rows.append((s.said.host, row))
            return
        if not text:
            self._end_thread(s)
            s.last = "blank"
            return
        kind = self._structure(s, text) or self._frame(s, text) or self._other(s, text)
        s.last = kind

    def _structure(self, s: _Stream, text: str) -> str:
        if m := pf.PYSPY_PROCESS.fullmatch(text):
            dump = self._new_dump(s, "py-spy")
            dump.pid, dump.argv = int(m.group(1)), tuple((m.group(2) or "").split())
        elif (m := pf.PYSPY_PARENT.fullmatch(text)) and s.dump is not None:
            s.dump.parent = int(m.group(1))
        elif (m := pf.PYSPY_PYTHON.fullmatch(text)) and s.dump is not None:
            s.dump.python = (m.group(1), m.group(2)) if m.group(2) else None
        elif m := pf.PYSPY_THREAD.fullmatch(text):
            active = m.group(2) not in (None, "idle")  # a core's dump says "gil" or nothing
            self._thread(s, "py-spy", pf.thread_id(m.group(1)), m.group(3), active)
            return "thread"
        elif pf.FAULT_START.match(text):
            self._end_dump(s)
            s.crash = m.group(1) if (m := pf.FAULT_CRASH.match(text)) else ""
        elif (m := pf.FAULT_THREAD.fullmatch(text)) or text == pf.FAULT_STACK:
            current = m is None or m.group(1) == "Current thread"
            tid, name = (pf.thread_id(m.group(2)), m.group(3)) if m else (0, None)
            self._thread(s, "faulthandler", tid, name, False, current)
            return "thread"
        elif text == pf.TRACEBACK:
            chain = s.chained and s.dump is not None and s.dump.tool == "traceback"
            if not chain:
                self._new_dump(s, "traceback")
            self._end_thread(s)
            name, s.thread_name, s.chained = s.thread_name or "MainThread", "", False
            s.draft = _Draft("traceback", 0, name, True, True, chain)
            return "thread"
        elif text == pf.TRACEBACK_FIRST:
            if s.draft is None or s.draft.tool != "py-bt" or s.draft.frames:
                self._new_dump(s, "py-bt")  # one thread's: gdb's current, faulthandler's
                s.draft = _Draft("py-bt", 0, "MainThread", False, False)
            return "thread"
        elif m := pf.GDB_THREAD.fullmatch(text):
            self._thread(s, "py-bt", int(m.group(1)), m.group(2), False)
            return "thread"
        elif m := pf.GDB_ATTACH.match(text):
            self._new_dump(s, "py-bt").pid = int(m.group(1))
        elif (m := pf.GDB_DETACHED.fullmatch(text)) and s.dump and s.dump.tool == "py-bt":
            s.dump.pid = s.dump.pid or int(m.group(1))
            self._end_dump(s)
        elif m := pf.THREAD_EXCEPTION.fullmatch(text):
            s.thread_name = m.group(1)
        elif m := pf.PYSTACK_THREAD.fullmatch(text):
            active = "Has the GIL" in (m.group(3) or "")
            self._thread(s, "pystack", int(m.group(1)), m.group(2), active)
            return "thread"
        elif m := pf.PYSTACK_EMPTY.fullmatch(text):
            self._thread(s, "pystack", int(m.group(1)), None, False)
            self._end_thread(s)
        elif text == pf.PYSTACK_CORE:
            self._new_dump(s, "pystack")
        elif (m := pf.PYSTACK_PID.match(text)) and s.dump is not None and not s.dump.pid:
            s.dump.pid = int(m.group(1))
        elif (m := pf.PYSTACK_ARGS.fullmatch(text)) and s.dump is not None and not s.dump.argv:
            s.dump.argv = tuple(m.group(2).split())
        elif pf.START.fullmatch(text):
            self._end_dump(s)
            s.json = pf.JsonBlock()
            s.json.feed(text)
            if s.json.closed:
                self._json(s)
        elif table := table_header(text):
            self._end_dump(s)
            s.table = table
        elif text in pf.CHAINED:
            s.chained = True
        else:
            return ""
        return "head"

    def _frame(self, s: _Stream, text: str) -> str:
        draft = s.draft
        if draft is None:
            return ""
        if draft.tool in ("py-spy", "pystack"):  # --locals: "Arguments:", then "name: repr"
            if s.locals and pf.LOCAL.match(text):
                return "local"
            if pf.LOCALS.fullmatch(text):
                s.locals = True
                return "local"
        frame = None
        if draft.tool == "py-spy" and s.last in ("thread", "frame", "local"):
            if m := pf.PYSPY_FRAME.fullmatch(text):
                frame = pf.pyspy_frame(*m.groups())
        elif draft.tool == "faulthandler" and s.last in ("thread", "frame"):
            if m := pf.FAULT_FRAME.fullmatch(text):
                frame = pf.fault_frame(*m.groups())
            elif text in pf.FAULT_NOTES:
                return "frame"
        elif draft.tool in ("traceback", "py-bt") and (m := pf.FAULT_FRAME.fullmatch(text)):
            frame = pf.fault_frame(*m.groups())
        elif draft.tool == "pystack" and (m := pf.PYSTACK_FRAME.fullmatch(text)):
            frame = pf.pystack_frame(*m.groups())
        if frame is None:
            return ""
        if len(draft.frames) < MAX_FRAMES:
            draft.frames.append(frame)
        elif draft.outer_first:  # the innermost come last: keep them, and the outermost
            del draft.frames[1]
            draft.frames.append(frame)
        s.gap, s.locals = 0, False
        return "frame"

    def _other(self, s: _Stream, text: str) -> str:
        said = read_header(text)
        if said is not None:
            self._section(s, *said)
            return "head"
        draft = s.draft
        if draft is not None and draft.tool in ("traceback", "pystack", "py-bt"):
            s.gap += 1  # a frame's source line, a caret line, the exception
            if draft.tool == "traceback" and pf.EXCEPTION.fullmatch(text) and _reported(text):
                s.draft = None  # the watchdog's own word, read as such (hang/watchdog.py)
            elif (
                draft.tool == "traceback"
                and not draft.chain  # a chain's end follows its first traceback's
                and pf.EXCEPTION.fullmatch(text)
                and not _waited(text)
            ):
                s.draft = None  # an error raised: a crash the failure readers name, no stack
            elif s.gap > GAP or (draft.tool == "traceback" and pf.EXCEPTION.fullmatch(text)):
                self._end_thread(s)
        else:
            self._end_thread(s)
        return "other"

    def _section(self, s: _Stream, said: Said, prompt: bool) -> None:
        self._end_dump(s)
        s.table = None
        mixed = (said.host and said.host != s.said.host) or (said.pid and s.said.pid != said.pid)
        if not prompt or s.claimed or mixed:
            keep = Said(host=s.said.host) if prompt else Said()
            s.said, s.claimed = said.over(keep.over(s.base)), False
        else:
            s.said = said.over(s.said)
        if s.said.pid:
            self.named.add((s.said.host, s.said.pid))

    def _thread(
        self, s: _Stream, tool: str, tid: int, name: str | None, active: bool, current: bool = False
    ) -> None:
        self._end_thread(s)
        dump = s.dump
        new = dump is None or dump.tool != tool or any(t.tid == tid for t in dump.threads)
        if tool == "faulthandler" and not new:
            # One dump's threads are parted by an empty line, and only one is the current one.
            new = s.last != "blank" or (current and dump is not None and dump.current)
        elif tool == "pystack" and not new and dump is not None:
            # pystack prints a process's threads newest first, so its main thread (the one that
            # runs the script's module) last: a thread after that is the next process's.
            new = any(f.function == "<module>" for t in dump.threads for f in t.frames)
        if new or dump is None:
            dump = self._new_dump(s, tool)
        dump.current = dump.current or current
        s.draft = _Draft(tool, tid, name or f"thread {tid}", active, tool == "pystack")

    def _new_dump(self, s: _Stream, tool: str) -> Dump:
        self._end_dump(s)
        s.dump = Dump(tool, s.said, self.count, crash=s.crash if tool == "faulthandler" else "")
        s.crash = ""
        return s.dump

    def _end_thread(self, s: _Stream) -> None:
        draft, s.draft, s.locals, s.gap = s.draft, None, False, 0
        if draft is None or s.dump is None:
            return
        frames = tuple(reversed(draft.frames) if draft.outer_first else draft.frames)
        threads = s.dump.threads
        if draft.chain and threads:
            threads[0] = _completed(threads[0], frames)
        elif not draft.chain:
            threads.append(Thread(draft.name, draft.tid, draft.active, frames))

    def _end_dump(self, s: _Stream) -> None:
        self._end_thread(s)
        dump, s.dump, s.chained = s.dump, None, False
        if dump is None or not (dump.threads or dump.pid):
            return
        # The header's rank and pid are the first process's below it, and its children's.
        if dump.parent is None and not s.claimed:
            s.claimed = True
        elif dump.parent is None:
            dump.said = Said(host=s.said.host).over(s.base)
        else:
            dump.said = dump.said._replace(pid=0)
        self.dumps.append(dump)

    def _json(self, s: _Stream) -> None:
        block, s.json = s.json, None
        for array in block.arrays() if block else []:
            try:
                threads = _threads({"threads": array})[0]
                pid = int(array[0].get("pid") or 0) if array else 0
            except (TypeError, ValueError, AttributeError):
                continue
            dump = self._new_dump(s, "json")
            dump.pid, dump.threads = pid, list(threads)
            self._end_dump(s)

    def finish(self, source: str) -> list[JobProcess]:
        for s in self.streams.values():
            self._end_dump(s)
        dumps = sorted(self.dumps, key=lambda d: d.began)
        return processes(dumps, self.rows, self.named, source)


def _reported(exception: str) -> bool:
    """A traceback whose exception is ProcessGroupNCCL's collective timeout (``RuntimeError:
    [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=77, ...)``): the watchdog
    reader reads that line, collective and number, better than the frames the exception cut
    short. (Gloo's transport timeouts name no collective: their frames say where it waited.)"""
    if not any(k in exception for k in WATCHDOG_KEYWORDS):
        return False
    said = read_watchdog(exception.split(":", 1)[-1].strip(), Origin())
    return said is not None and said.kind == "timeout"


def _waited(exception: str) -> bool:
    """Whether a traceback's exception is how a waiting process ends: stopped from outside (^C,
    a launcher's signal), a timeout, a peer gone, a communicator aborted. Its frames say where
    it waited. Any other exception is an error the process raised, not a place it was stuck in
    (``DistBackendError: NCCL error ... unhandled system error`` at start-up)."""
    return pf.WAITED.search(exception) is not None


def _completed(first: Thread, chained: tuple[Frame, ...]) -> Thread:
    """A chained traceback shows the frames outside the first one's outermost (the handler's
    caller, up to the module): the first one's stack, completed with them."""
    if not first.frames:
        return first
    outer = first.frames[-1]
    at = next(
        (i for i, f in enumerate(chained) if (f.file, f.function) == (outer.file, outer.function)),
        None,
    )
    if at is None:
        return first
    return Thread(first.name, first.tid, first.active, first.frames + chained[at + 1 :])


def read_pasted(lines: Iterable[tuple[Origin, str]], source: str) -> list[JobProcess]:
    """The processes a paste shows (one file's lines in order, each peeled: ``(origin,
    message)``), with their threads innermost frame first and their state where a process
    table gives it. ``source`` names the paste in what is said of a process without a stack."""
    reader = _Reader()
    for origin, message in lines:
        reader.feed(origin, message)
    return reader.finish(source)
