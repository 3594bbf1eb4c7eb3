"""The lines of a pasted stack dump, one tool at a time: thread headers and frames as the tools
print them, read from their source.

- py-spy 0.4 ``dump`` (src/dump.rs ``write_traces``/``write_trace``, and ``print_traces`` of
  src/coredump.rs for ``--core``): ``Process PID: CMD``, ``Python vX.Y.Z (EXE)``,
  ``Parent Process PID: CMD`` (``--subprocesses``), ``Thread TID (idle|active|active+gil):
  "NAME"`` (``(gil)`` or nothing from a core), frames ``    NAME (FILE:LINE)`` innermost first,
  ``FILE`` alone where the line is 0 (a native frame: a library or ``?``), ``--locals`` blocks
  (``Arguments:``/``Locals:`` then ``name: repr``).
- pystack 1.x (src/pystack/traceback_formatter.py, __main__.py): ``Traceback for thread TID
  (NAME) [STATUS] (most recent call last):``, ``(Python) File "F", line N, in FUNC`` and ``(C)
  File "F", line N, in SYMBOL [(inlined)] (LIBRARY)``, outermost first, each Python frame with
  its source line; a core's ``pid: N ppid: N ...`` and ``executable: X arguments: ARGS``.
- CPython's faulthandler (Python/traceback.c ``write_thread_id``, ``dump_frame``): ``Current
  thread 0xHEX [NAME] (most recent call first):`` or ``Thread 0xHEX ...``, threads of one dump
  separated by an empty line, ``  File "F", line N in FUNC`` innermost first.
- A Python traceback (``Traceback (most recent call last):``, ``  File "F", line N, in FUNC``,
  outermost first, source and caret lines between, the exception last).
- ``py-spy dump --json`` (src/dump.rs: serde_json's pretty print of ``Vec<StackTrace>``): an
  array of threads a process, over many lines or one, arrays one after another. A block's lines
  are gathered while its brackets stay open (serde escapes line breaks in strings, so brackets
  count without the strings); a line no JSON line looks like ends it and what was gathered is
  dropped (a paste cut short, a foreign line).
- gdb's ``py-bt`` (CPython's Tools/gdb/libpython.py): ``Traceback (most recent call first):``
  and a traceback's frames innermost first, under ``thread apply all``'s ``Thread N (Thread
  0xHEX (LWP TID) "NAME"):``, ``[Inferior 1 (process PID) detached]`` last.

The peeling layer has taken each line's indentation: nothing here depends on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from doctor.explain.hang.exits import NAMED
from doctor.facts.hang.stacks import Frame

PYSPY_PROCESS = re.compile(r"Process (\d+):(?: (.*))?")
PYSPY_PARENT = re.compile(r"Parent Process (\d+):(?: (.*))?")
PYSPY_PYTHON = re.compile(r"Python v(\d+\.\d+)\S*(?: \((.*)\))?")
PYSPY_THREAD = re.compile(
    r'Thread (0x[0-9A-Fa-f]+|\d+)(?: \((idle|active\+gil|active|gil)\))?(?:: "(.*)")?\s*'
)
# NAME (FILE:LINE) or NAME (FILE); the file has no parentheses, the name may (C++ symbols).
PYSPY_FRAME = re.compile(r"(.+?) \(([^()]*?)(?::(\d+))?\)")
LOCALS = re.compile(r"(?:Arguments|Locals):")
LOCAL = re.compile(r"[A-Za-z_]\w*: ")

PYSTACK_THREAD = re.compile(
    r"Traceback for thread (\d+)(?: \((.*?)\))?(?: \[(.*?)\])? \(most recent call last\):"
)
PYSTACK_FRAME = re.compile(r'\((Python|C)\) File "(.*)", line (\d+|\?+), in (.+)')
PYSTACK_EMPTY = re.compile(r"The frame stack for thread (\d+) is empty")
PYSTACK_CORE = "Core file information:"
PYSTACK_PID = re.compile(r"pid: (\d+) ppid: (\d+)")
PYSTACK_ARGS = re.compile(r"executable: (\S*) arguments: ?(.*)")
_LIBRARY = re.compile(r"(.*?)(?: \(inlined\))? \(([^()]*)\)")

# Python 3.14 writes the thread's name in brackets after its id (write_thread_name).
FAULT_THREAD = re.compile(
    r"(Current thread|Thread) (0x[0-9A-Fa-f]+)(?: \[(.*)\])? \(most recent call first\):"
)
FAULT_STACK = "Stack (most recent call first):"  # dump_traceback(all_threads=False)
# (A traceback's has a comma before "in", and "| " before it in an exception group's.)
FAULT_FRAME = re.compile(r'(?:\| )?File (?:"(.*)"|\?\?\?), line (\d+|\?\?\?),? in (.+)')
FAULT_NOTES = ("Garbage-collecting", "<no Python frame>", "<tstate is freed>", "...")
# What starts a faulthandler dump: a fatal error, dump_traceback_later's timeout.
FAULT_START = re.compile(r"Fatal Python error: |Timeout \(\d+:\d\d:\d\d\)!")
# The crashes faulthandler reports (faulthandler.c's handlers): the signals a process brings on
# itself, by the names exits.py reads in srun's report; a SIGKILL is reported by no one. Not
# "Aborted": a rank's watchdog aborts it after its own timeout, waiting.
FAULT_CRASH = re.compile(
    "Fatal Python error: (" + "|".join(n for n, signal in NAMED.items() if signal != 9) + ")"
)

TRACEBACK = "Traceback (most recent call last):"
# Innermost first: gdb's py-bt (CPython's Tools/gdb/libpython.py, frames as a traceback's, a
# C call as "<built-in method ...>"), and the first faulthandler's (frames without the comma).
TRACEBACK_FIRST = "Traceback (most recent call first):"
# gdb's "thread apply all py-bt": each thread's header, and the process it detached from.
GDB_THREAD = re.compile(r'Thread \d+ \(Thread 0x[0-9A-Fa-f]+ \(LWP (\d+)\)(?: "(.*)")?\):')
GDB_ATTACH = re.compile(r"Attaching to (?:process|program: .*, process) (\d+)")
GDB_DETACHED = re.compile(r"\[Inferior \d+ \(process (\d+)\) detached\]")
# threading.excepthook (Lib/threading.py): a thread's uncaught exception, its name first.
THREAD_EXCEPTION = re.compile(r"Exception in thread (.+?)(?: \(.*\))?:")
CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
EXCEPTION = re.compile(
    r"(?:\| )?[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Timeout|StopIteration)"
    r"(?::.*)?"
)
# The exceptions a waiting process ends with (hang/pasted.py ``_waited``): an interrupt or a
# signal (KeyboardInterrupt, SystemExit, torchrun's SignalException "got signal: 15"), any
# timeout (Gloo's "Timed out waiting 1800000ms", the store's "Socket Timeout", NCCL's watchdog),
# a peer that closed or reset the connection, a communicator aborted.
WAITED = re.compile(
    r"Interrupt|SystemExit|Signal|got signal|[Tt]ime(?:d)?[ -]?[Oo]ut|[Aa]bort|[Cc]losed by peer"
    r"|[Rr]eset by peer|[Bb]roken pipe|[Ww]atchdog|[Hh]eartbeat|[Dd]eadline"
)

# A native frame's file: a shared object, a C/C++/CUDA source, or py-spy's "?" (no symbol).
_NATIVE_FILE = re.compile(r"\.so(?:\.[\w.]+)?$|\.(?:c|cc|cpp|cxx|h|hpp|cu|cuh|S|s|rs)$|^\?$")
# What py-spy prints in place of a file where a frame has no line: a module (a path, a soname,
# an executable: python3.11, python3) or "?".
_MODULE = re.compile(r"\?|[^\s()]*[./][^\s()]*|(?:python|pypy)[\d.]*")


def pyspy_frame(name: str, file: str, line: str | None) -> Frame | None:
    """A py-spy frame, or None where the line only looks like one: without a line number the
    file must be a module's, and no function's name holds ": " (a log's "key : value (x)")."""
    if ": " in name or (line is None and not _MODULE.fullmatch(file)):
        return None
    python = not _NATIVE_FILE.search(file) and (line is not None or file.endswith(".py"))
    return Frame(name, file, int(line) if line else 0, native=not python)


def number(text: str) -> int:
    return int(text) if text.isdigit() else 0


def pystack_frame(kind: str, file: str, line: str, rest: str) -> Frame:
    if kind == "Python":
        return Frame(rest, file, number(line))
    m = _LIBRARY.fullmatch(rest)
    symbol, library = (m.group(1), m.group(2)) if m else (rest, "")
    return Frame(symbol, library if file.startswith("?") or not file else file, number(line), True)


def fault_frame(file: str | None, line: str, name: str) -> Frame:
    return Frame(name, file or "???", number(line))


def thread_id(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


# py-spy --json: a block starts with "[" (pretty) or "[{" (one line).
START = re.compile(r"\[\s*(?:\{.*|\])?")
_JSON_LINE = re.compile(r'[\[\]{}"\d-]|true\b|false\b|null\b')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
MAX_JSON = 8 << 20  # one paste's JSON: py-spy's dump of one process is tens of kilobytes


class JsonBlock:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.depth = 0
        self.size = 0

    def feed(self, text: str) -> bool:
        """Take a line; False where it cannot be one (the block is then void)."""
        if not _JSON_LINE.match(text) or self.size + len(text) > MAX_JSON:
            return False
        self.parts.append(text)
        self.size += len(text)
        bare = _STRING.sub("", text)
        self.depth += bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")
        return True

    @property
    def closed(self) -> bool:
        return self.depth <= 0

    def arrays(self) -> list[list[dict[str, Any]]]:
        """Each array of threads the block holds (none where it does not decode)."""
        text, found, at = "\n".join(self.parts), [], 0
        decoder = json.JSONDecoder()
        while at < len(text):
            try:
                value, at = decoder.raw_decode(text, at)
            except (ValueError, RecursionError):  # not JSON; nested past the decoder's depth
                break
            if isinstance(value, list) and all(
                isinstance(t, dict) and isinstance(t.get("frames"), list) for t in value
            ):
                found.append(value)
            while at < len(text) and text[at].isspace():
                at += 1
        return found
