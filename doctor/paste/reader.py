"""Read what users give `doctor analyze`: pasted command output (files, folders, stdin) or captures.

Each argument is a file, a folder of files, ``NODE=FILE`` (or ``NODE=DIR``, ``NODE=-``) or ``-``
(stdin, the node named by ``--node``). A file names its node by its stem. A file holding a
`doctor collect --save-raw` capture is that capture; any other file is pasted text, split into
segments (doctor/paste/split.py), each parsed by its kind into a capture fragment (a job's log,
which the program's own prints split, as one: Kind.whole), the fragments merged into one
synthesized capture per node whose ``probe`` header says it was pasted. Inputs naming the same
node merge.

Every input is bounded: at most MAX_INPUT_BYTES are read from each (the rest is dropped and the
header says so), lines are cut at MAX_LINE_CHARS, a folder gives at most MAX_FOLDER_FILES.
Anything wrong is a UsageError of one line, never a traceback.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from doctor.core.capture import Capture, CaptureError
from doctor.core.errors import UsageError
from doctor.core.files import open_regular
from doctor.core.jsonable import loads
from doctor.core.nodeset import as_host, check_host
from doctor.paste.kind import Kind, merge
from doctor.paste.registry import KINDS, kinds_line
from doctor.paste.split import Segment, split

MAX_INPUT_BYTES = 8 << 20
MAX_LINE_CHARS = 16 << 10
MAX_FOLDER_FILES = 512
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NODE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
SECTIONS = ("files", "dirs", "links", "commands", "values")


def read_inputs(
    args: Sequence[str],
    *,
    stdin_node: str | None = None,
    stdin: BinaryIO | None = None,
    kinds: Sequence[Kind] = KINDS,
) -> dict[str, Capture]:
    """One Capture per node from files, folders, ``NODE=FILE`` and ``-``, in the order given."""
    if not args:
        raise UsageError("nothing to analyze: give files, folders, NODE=FILE or - (stdin)")
    docs: dict[str, dict[str, Any]] = {}
    for arg in args:
        for node, label, data, cut in _sources(arg, stdin_node, stdin):
            doc = document(label, data, cut, kinds)
            if node in docs:
                _combine(docs[node], doc)
            else:
                docs[node] = doc
    return {node: Capture(doc) for node, doc in docs.items()}


def _sources(
    arg: str, stdin_node: str | None, stdin: BinaryIO | None
) -> Iterator[tuple[str, str, bytes, bool]]:
    """(node, label, bytes, truncated) for each input an argument names."""
    node, sep, rest = arg.partition("=")
    named = bool(sep) and _NODE.match(node) is not None and not Path(arg).exists()
    if named:
        check_host(node, f"{arg}: NODE=FILE")
    target = rest if named else arg
    if target == "-":
        name = node if named else check_host(stdin_node, "--node") if stdin_node else "stdin"
        data, cut = _bounded((stdin or sys.stdin.buffer).read, "stdin")
        yield name, "stdin", data, cut
        return
    path = Path(target)
    if path.is_dir():
        files = _folder(path)
        for file in files:
            yield (node if named else as_host(file.stem)), str(file), *_read(file)
        return
    if not path.exists():
        raise UsageError(f"{target}: no such file or folder")
    yield (node if named else as_host(path.stem)), str(path), *_read(path)


def _folder(path: Path) -> list[Path]:
    try:
        files = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.is_file())
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    if not files:
        raise UsageError(f"{path}: no files in it")
    if len(files) > MAX_FOLDER_FILES:
        raise UsageError(f"{path}: {len(files)} files, more than {MAX_FOLDER_FILES}")
    return files


def _read(path: Path) -> tuple[bytes, bool]:
    try:
        with open_regular(path) as handle:
            return _bounded(handle.read, str(path))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def _bounded(read: Any, label: str) -> tuple[bytes, bool]:
    try:
        data = read(MAX_INPUT_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{label}: cannot read: {exc}") from None
    if not isinstance(data, bytes):
        raise UsageError(f"{label}: not readable as bytes")
    return data[:MAX_INPUT_BYTES], len(data) > MAX_INPUT_BYTES


def _binary(data: bytes) -> bool:
    head = data[: 64 << 10]
    if b"\0" in head:
        return True
    controls = sum(1 for b in head if b < 32 and b not in b"\t\n\r\f\v\x1b")
    return controls > len(head) // 10


def text_of(data: bytes) -> str:
    """Bytes as text: UTF-8 (bad bytes replaced), no BOM, LF line ends, no terminal colours
    (`ip -c a`, a session recorded with its escape sequences)."""
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def document(label: str, data: bytes, truncated: bool, kinds: Sequence[Kind] = KINDS) -> dict:
    """The capture document of one input: a saved capture as it is, or one made from a paste."""
    if _binary(data):
        raise UsageError(f"{label}: binary data, not command output")
    text = text_of(data)
    if text.lstrip().startswith("{"):
        saved = _saved_capture(label, text)
        if saved is not None:
            return saved
    # A capture is one long line; pasted output is cut at MAX_LINE_CHARS a line.
    text = "\n".join(line[:MAX_LINE_CHARS] for line in text.split("\n"))
    doc: dict[str, Any] = {section: {} for section in SECTIONS}
    records = []
    segments = split(text, kinds)
    whole = _whole(segments)
    for index, segment in enumerate(segments):
        record: dict[str, Any] = {"input": label, "line": segment.first_line}
        if segment.command:
            record["command"] = segment.command[:200]
        kind = segment.kind
        if kind is not None and kind.name in whole:
            fragment, at = whole[kind.name]
            merged = index == at  # one output: merged once, at its first segment
        else:
            fragment, merged = (_parse(kind, segment.text) if kind else {}), True
        record["kind"] = kind.name if kind and fragment else None
        if not fragment:
            opening = next((ln.strip() for ln in segment.lines if ln.strip()), "")
            record["first"] = opening[:120]
        elif merged:
            merge(doc, {k: v for k, v in fragment.items() if k in SECTIONS})
        records.append(record)
    if not any(r["kind"] for r in records):
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        seen = f" (it begins {first[:60]!r})" if first else " (it is empty)"
        raise UsageError(f"{label}: no command output recognised{seen}; understood: {kinds_line()}")
    header: dict[str, Any] = {"source": "paste", "inputs": [label], "segments": records}
    if truncated:
        header["truncated"] = [f"{label}: only the first {MAX_INPUT_BYTES} bytes were read"]
    doc["probe"] = header
    return doc


def _whole(segments: list[Segment]) -> dict[str, tuple[dict[str, Any], int]]:
    """Each whole kind's (Kind.whole: a job's log) fragment, parsed from the text of all the
    segments from its first to its last (the program's prints, and other kinds' lines, between
    its lines included), and the index of its first segment."""
    spans: dict[str, tuple[Kind, int, int]] = {}
    for index, segment in enumerate(segments):
        kind = segment.kind
        if kind is not None and kind.whole:
            first = spans[kind.name][1] if kind.name in spans else index
            spans[kind.name] = (kind, first, index)
    return {
        name: (_parse(kind, "".join(s.text for s in segments[first : last + 1])), first)
        for name, (kind, first, last) in spans.items()
    }


def _saved_capture(label: str, text: str) -> dict | None:
    """A `doctor collect --save-raw` capture; None where the text is no JSON object at all.

    No command a user pastes prints a JSON object (`ip -j` prints an array), so an object is a
    capture or a usage error, as is a cut-off one that names the probe's header.
    """
    try:
        raw = loads(text)
    except ValueError as exc:
        if '"probe"' in text:
            raise UsageError(f"{label}: corrupt capture: {exc}") from None
        return None  # read as pasted text
    try:
        Capture(raw)
    except CaptureError as exc:
        raise UsageError(f"{label}: corrupt capture: {exc}") from None
    return raw if isinstance(raw, dict) else None


def _parse(kind: Kind, text: str) -> dict[str, Any]:
    """A kind's fragment; a parser that breaks on odd text leaves the segment unrecognised."""
    try:
        fragment = kind.parse(text)
    except Exception:  # one bad segment must not sink the input: it is reported as not read
        return {}
    return fragment if isinstance(fragment, dict) else {}


def _combine(into: dict[str, Any], doc: dict[str, Any]) -> None:
    """Merge a node's next input: sections deep-merge, headers keep every input and segment."""
    header, more = into["probe"], doc["probe"]
    merge(into, {k: v for k, v in doc.items() if k in SECTIONS})
    if more.get("source") == "paste" or header.get("source") == "paste":
        header["inputs"] = [*header.get("inputs", []), *more.get("inputs", [])]
        header["segments"] = [*header.get("segments", []), *more.get("segments", [])]
        header["truncated"] = [*header.get("truncated", []), *more.get("truncated", [])]
        if not header["truncated"]:
            del header["truncated"]
        header.setdefault("source", "paste")


def skipped(cap: Capture) -> list[str]:
    """One line per pasted segment no kind could read, for the user to see what was ignored."""
    out = []
    for record in cap.raw["probe"].get("segments", []):
        if record.get("kind") is None:
            what = record.get("command") or record.get("first") or "?"
            out.append(f"{record['input']} line {record['line']}: not understood, skipped: {what}")
    return out + list(cap.raw["probe"].get("truncated", []))
