"""A PyTorch Flight Recorder dump, read as plain values and trimmed to what the hang model reads.

Torch writes a rank's dump as a pickle (``TORCH_FR_DUMP_TEMP_FILE``, formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, or on demand through its pipe); ``_dump_fr_trace_json`` and
the debug handlers give the same document as JSON. Either is read here without building any
object: a pickle that names a class or a function is refused. The stacks agent reads dumps on the
nodes and ``doctor explain`` reads a dump file it is given: both use this one reader, so the agent
ships this file above its own source (doctor/stages/stacks.py): standard library only, valid on
Python 3.8, nothing imported from the project.
"""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, ClassVar

FRAMES_KEPT = 24  # Flight Recorder frames per entry, innermost first
ENTRIES_KEPT = 16  # Flight Recorder entries per process group, the newest
MAX_BYTES = 64 << 20  # a dump of 20000 entries with their frames is a few MB
MAX_DEPTH = 32  # a dump nests 5 deep (entries, an entry, its frames, a frame, a value)
# Values a dump may hold once read, beyond one per byte: a pickle takes an opcode per value, but a
# list it names twice is copied twice (torch's own dumps share strings only: 200 values in 1.6 kB).
SHARED = 100_000
KEYS = ("version", "comm_lib_version", "pg_status", "pg_config")


# The pure-Python unpickler, whose memo, stack and reads typeshed does not describe.
PurePython: Any = pickle._Unpickler


class Plain(PurePython):
    """Plain values only: a dump that names any class or function is not read.

    The pure-Python unpickler, not the C one: the C one sizes its memo by the largest index a
    PUT names, so 9 bytes whose LONG_BINPUT names index 50,000,000 took 800 MB (0xFFFFFFFF asks
    for 32 GB); this one keeps its memo in a dict, and a PUT past the entries stored so far (a
    pickler numbers them in order) is refused. About twice as slow: a dump is a few MB."""

    dispatch: ClassVar[dict[int, Any]] = dict(PurePython.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the dump names {module}.{name}")

    def _put(self, index: int) -> None:
        if index > len(self.memo):
            raise pickle.UnpicklingError(f"memo index {index} past the {len(self.memo)} stored")
        self.memo[index] = self.stack[-1]

    def _load_put(self) -> None:
        self._put(int(self.readline()[:-1]))

    def _load_binput(self) -> None:
        self._put(self.read(1)[0])

    def _load_long_binput(self) -> None:
        self._put(int.from_bytes(self.read(4), "little"))

    dispatch[pickle.PUT[0]] = _load_put
    dispatch[pickle.BINPUT[0]] = _load_binput
    dispatch[pickle.LONG_BINPUT[0]] = _load_long_binput


def plain(value: Any, budget: list[int], depth: int = 0) -> Any:
    """Dicts with str keys, lists, str for bytes. ``budget`` holds how many values may still be
    made: a pickle that nests a list named twice in one named twice, and so on, would grow
    without end."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise ValueError("more values, or deeper, than a dump holds")
    if isinstance(value, dict):
        return {str(k): plain(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v, budget, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


def trimmed(doc: dict[str, Any]) -> dict[str, Any]:
    """The newest entries of each process group, each with its innermost frames."""
    entries = doc.get("entries")
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    by_pg: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_pg.setdefault(json.dumps(entry.get("process_group"), default=str), []).append(entry)
    kept = []
    for group in by_pg.values():
        for entry in group[-ENTRIES_KEPT:]:
            frames = entry.get("frames")
            frames = frames[:FRAMES_KEPT] if isinstance(frames, list) else []
            kept.append(dict(entry, frames=frames))
    out = {k: doc.get(k) for k in KEYS}
    out["entries"] = kept
    out["entries_total"] = len(entries)
    return out


def read_dump(data: bytes) -> dict[str, Any]:
    """A dump's bytes (pickle or JSON), trimmed; ValueError saying why when they are not one."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"{len(data)} bytes: larger than a dump")
    doc = None
    if data[:1] == b"\x80":  # pickle protocol 2 and later, as torch writes it
        try:
            doc = Plain(io.BytesIO(data)).load()
        except Exception as exc:  # a truncated or foreign pickle raises almost anything
            raise ValueError(f"not a readable pickle: {exc}") from None
    else:
        try:
            doc = json.loads(data.decode("utf-8-sig", "replace"))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"neither a pickle nor JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict) or not any(k in doc for k in ("entries", "pg_status")):
        raise ValueError("not a Flight Recorder dump: no entries, no pg_status")
    try:
        return trimmed(plain(doc, [len(data) + SHARED]))
    except RecursionError:
        raise ValueError("nested deeper than a dump") from None
