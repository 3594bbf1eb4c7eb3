"""NCCL RAS reports (``ncclras``, NCCL >= 2.24) found in a pasted text, text or JSON.

A report is what NCCL's RAS client prints for ``STATUS`` or ``VERBOSE STATUS``
(src/ras/client_support.cc): ``NCCL version 2.28.9 compiled with CUDA 13.0``, the job summary,
the communicators table, then ``Errors`` and ``Warnings`` with per communicator ``#0-0 (hash)
INCOMPLETE|ERROR|MISMATCH`` blocks of indented ``Rank N ...`` lines; or, after ``SET FORMAT
json`` (NCCL >= 2.28), one JSON document with ``"nccl_version"``. A paste may wrap every line
(a launcher's or a collector's prefix), drop their indentation (doctor/core/logline.py), hold
foreign lines among them, or stop short: each report is rebuilt from its own lines only, in
NCCL's layout, for doctor/facts/hang/ras.py:read_ras.
"""

from __future__ import annotations

import re

from doctor.core.logline import strip_prefixes

MAX_LINE = 4096
MAX_REPORT_LINES = 200_000  # a RAS report of a 100k-rank job in verbose mode
GAP = 40  # foreign lines a text report may hold between two of its own
MAX_REPORTS = 64

# Lines that begin a text report (or its remains, when the paste starts inside one).
START = re.compile(
    r"NCCL version \S+ compiled with CUDA|Gathering data about the (?:RAS network|NCCL comm)"
    r"|#\d+-\d+ \([0-9a-f]+\) (?:INCOMPLETE|ERROR|MISMATCH)|Missing communicator data from \d+"
    r"|Communicator ranks have different|managed by process \d+ on node"
    r"|Group +Comms +Nodes +Ranks"
)
HEADER = re.compile(r"NCCL version \S+ compiled with CUDA \S+")
# A report's own lines: indented ones (NCCL indents by two) and those at the margin.
INDENTED = re.compile(
    r"(?:Rank \d+ (?:--|has|reported) .*"
    r"|\d+ ranks (?:have|reported) .*"
    r"|Communicator ranks have different .*"
    r"|Missing communicator data from \d+ .*"
    r"|Process \d+ on node \S+ managing GPU.*"
    r"|\[could not find information on \d+ process.*"
    r"|\d+ job process(?:es)? (?:is|are) considered dead.*"
    r"|The (?:missing|unknown) ranks?: [\d,]+.*"
    r"|(?:Initialization|Asynchronous) errors? on \d+ ranks?.*"
    r"|Encountered \d+ communication timeouts? .*"
    r"|Node \S+ running process.*)$"
)
MARGIN = re.compile(
    r"(?:NCCL version \S+ compiled with CUDA .*|CUDA runtime version .*"
    r"|#\d+-\d+ \([0-9a-f]+\) [A-Z,]+|(?:Errors|Warnings|Job summary|INCOMPLETE|DEAD|TIMEOUT)"
    r"|={5,}|Communicators\.\.\..*|Gathering data about .*"
    r"|Group +Comms .*|#? +in group .*|\(total\) .*|Nodes +Processes.*"
    r"|No communicator data collected!|The outlier nodes?:)$"
)
COMM = re.compile(r"#\d+-\d+ \([0-9a-f]+\) [A-Z,]+$")  # a communicator's block, under a wrapping
TABLE_ROW = re.compile(r"^[\d -]+(?:[A-Z]+ +[A-Z,]+)?$")  # a summary or communicators row
JSON_START = '"nccl_version"'
JSON_LINE = re.compile(r'^(?:[{}\[\],]+|"[\w ]+"\s*:\s*.*)$')


def find_ras(lines: list[str]) -> list[tuple[int, dict[str, str]]]:
    """Each report: (its first line's number, {"format": "text"|"json", "body": the report})."""
    found: list[tuple[int, dict[str, str]]] = []
    n, total = 0, len(lines)
    while n < total and len(found) < MAX_REPORTS:
        line = lines[n][:MAX_LINE]
        if JSON_START in line:
            start = _json_start(lines, n)
            body, n = _json(lines, start)
            found.append((start + 1, {"format": "json", "body": body}))
        elif START.search(line):
            body, end = _text(lines, n)
            if body:
                found.append((n + 1, {"format": "text", "body": body}))
            n = end
        else:
            n += 1
    return found


def _json_start(lines: list[str], at: int) -> int:
    """The line of the ``{`` that opens the document whose first key is on line ``at``."""
    for back in range(at, max(-1, at - 3), -1):
        if _message(lines[back]).endswith("{"):
            return back
    return at


def _message(line: str) -> str:
    return strip_prefixes(line[:MAX_LINE])[0].strip()


def _json(lines: list[str], start: int) -> tuple[str, int]:
    """The document's lines from ``start`` until its braces close (foreign lines skipped), and
    the line after it; a document cut short is closed after its last whole line."""
    kept: list[str] = []
    closers: list[str] = []
    n = start
    while n < len(lines) and len(kept) < MAX_REPORT_LINES:
        text = _message(lines[n])
        n += 1
        if n - 1 == start:  # "{", or a paste that starts at its first key
            text = text[text.index("{") :] if "{" in text else "{\n" + text
        elif not JSON_LINE.match(text):
            continue
        kept.append(text)
        if not _close(text, closers):
            return "\n".join(kept), n
    if kept and not kept[-1].endswith((",", "{", "[")):
        kept.pop()  # the line the paste stops in may be cut
    if kept and kept[-1].endswith(","):
        kept[-1] = kept[-1][:-1]
    return "\n".join([*kept, *reversed(_close("\n".join(kept), []))]), n


def _close(text: str, closers: list[str]) -> list[str]:
    """``closers`` (what is open, innermost last) after ``text``."""
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', "", text):
        if ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]" and closers:
            closers.pop()
    return closers


def _text(lines: list[str], start: int) -> tuple[str, int]:
    """A text report's own lines from ``start``, in NCCL's layout, and the line after it: it ends
    after GAP foreign lines, at a JSON document, or where another report begins."""
    kept: list[str] = []
    n, last = start, start
    while n < len(lines) and n - last <= GAP and len(kept) < MAX_REPORT_LINES:
        line = lines[n][:MAX_LINE]
        if n > start and ((HEADER.search(line) and kept) or JSON_START in line):
            break
        own = _own(line)
        if own is not None:
            kept.append(own)
            last = n
        elif not line.strip():
            kept.append("")
        n += 1
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept), last + 1


def _own(line: str) -> str | None:
    """The line as NCCL printed it, or None when it is not a line of a report."""
    message = _message(line)
    if (m := INDENTED.search(message)) is not None:
        return "  " + m.group(0)
    if MARGIN.match(message):
        return message
    if (m := COMM.search(message)) is not None:
        return m.group(0)
    if TABLE_ROW.match(message) and any(c.isdigit() for c in message):
        return "    " + message
    return None
