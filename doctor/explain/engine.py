"""Scan logs for known failure signatures and NCCL context; order what went wrong by time."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor.explain.catalogue import Signature, catalogue
from doctor.explain.nccl_log import KEYWORDS as NCCL_KEYWORDS
from doctor.explain.nccl_log import NcclLog
from doctor.explain.prefix import Origin, strip_prefixes
from doctor.explain.source import LogReadError, iter_chunks, open_log
from doctor.model import Finding, Fix, Severity

MAX_EVIDENCE = 3
MAX_EVIDENCE_CHARS = 300
MAX_NAMES = 64  # hosts/ranks remembered per finding and in the context


@dataclass
class Hit:
    """Where a signature was first seen, and how often after."""

    signature: Signature
    groups: dict[str, str]
    origin: Origin
    source: str  # file name
    line_no: int
    order: int  # global arrival order, across files
    count: int = 0
    evidence: list[str] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)


@dataclass
class Explanation:
    """Everything `doctor explain` learnt from its inputs."""

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    hits: dict[str, Hit] = field(default_factory=dict)
    nccl: NcclLog = field(default_factory=NcclLog)
    hosts: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # files that could not be read (fully)

    def ordered(self) -> list[Hit]:
        """Hits in the order they happened: by timestamp when every hit has one, else by arrival."""
        hits = list(self.hits.values())
        if hits and all(h.origin.time is not None for h in hits):
            return sorted(hits, key=lambda h: (h.origin.time, h.order))
        return sorted(hits, key=lambda h: h.order)

    def first_error(self) -> Hit | None:
        """The earliest root-cause failure.

        Consequences ('peer closed', 'unhandled system error') and the generic network messages
        (any program's 'Connection refused') only count when nothing more specific was seen.
        """
        ordered = self.ordered()
        for rank in (_specific, _primary, _any):
            chosen = [h for h in ordered if rank(h)]
            if chosen:
                return chosen[0]
        return None


def _primary(hit: Hit) -> bool:
    return not hit.signature.secondary and hit.signature.severity >= Severity.WARN


def _specific(hit: Hit) -> bool:
    return _primary(hit) and hit.signature.source != "any"


def _any(hit: Hit) -> bool:
    return True


def keyword_regex(words: Iterable[bytes]) -> bytes:
    """One regex for many literals, as a trie: about twice as fast in `re` as a flat alternation.

    Where one keyword is a prefix of another the longer one matches, so ``findall`` returns
    whole keywords.
    """
    root: dict[int, Any] = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}  # end of a keyword

    def emit(node: dict[int, Any]) -> bytes:
        branches = [
            re.escape(bytes([b])) + emit(child) for b, child in sorted(node.items()) if b >= 0
        ]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        return b"(?:" + body + b")?" if -1 in node else body

    return emit(root)


class Scanner:
    """Feed lines (bytes) in; read the Explanation out. Memory stays bounded whatever the input."""

    def __init__(self, signatures: Iterable[Signature] | None = None) -> None:
        self.signatures = tuple(catalogue() if signatures is None else signatures)
        by_keyword: dict[str, list[int]] = {}
        for index, sig in enumerate(self.signatures):
            for kw in sig.keywords:
                by_keyword.setdefault(kw, []).append(index)
        for kw in NCCL_KEYWORDS:
            by_keyword.setdefault(kw, [])
        self._by_keyword = {kw.encode(): tuple(v) for kw, v in by_keyword.items()}
        self._nccl_keywords = {kw.encode() for kw in NCCL_KEYWORDS}
        self._trigger = re.compile(keyword_regex(self._by_keyword))
        self.result = Explanation()
        self._order = 0

    def feed_lines(self, lines: list[bytes], source: str, first_line_no: int) -> None:
        """Scan a batch of lines; ``first_line_no`` is the 1-based number of ``lines[0]``."""
        search = self._trigger.search
        for offset, raw in enumerate(lines):
            if search(raw) is not None:
                self._scan(raw, source, first_line_no + offset)
        self.result.lines += len(lines)

    def _scan(self, raw: bytes, source: str, line_no: int) -> None:
        found = set(self._trigger.findall(raw))
        text, origin = strip_prefixes(raw.decode("utf-8", "replace").rstrip("\r"))
        self._note_origin(origin)
        if found & self._nccl_keywords:
            self.result.nccl.feed(text, origin.host, origin.pid)
        candidates = sorted({i for kw in found for i in self._by_keyword[kw]})
        for index in candidates:
            sig = self.signatures[index]
            m = sig.match(text)
            if m is not None:
                self._record(sig, m, text, origin, source, line_no)
                return

    def _note_origin(self, origin: Origin) -> None:
        if origin.host and len(self.result.hosts) < MAX_NAMES:
            self.result.hosts.add(origin.host)
        if origin.rank is not None and len(self.result.ranks) < MAX_NAMES:
            self.result.ranks.add(origin.rank)

    def _record(
        self, sig: Signature, m: re.Match[str], text: str, origin: Origin, source: str, line_no: int
    ) -> None:
        hit = self.result.hits.get(sig.code)
        if hit is None:
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            hit = Hit(sig, groups, origin, source, line_no, self._order)
            self._order += 1
            self.result.hits[sig.code] = hit
        hit.count += 1
        evidence = f"{source}:{line_no}: {text.strip()[:MAX_EVIDENCE_CHARS]}"
        if len(hit.evidence) < MAX_EVIDENCE and all(
            not e.endswith(text.strip()[:MAX_EVIDENCE_CHARS]) for e in hit.evidence
        ):
            hit.evidence.append(evidence)
        if origin.rank is not None and len(hit.ranks) < MAX_NAMES:
            hit.ranks.add(origin.rank)
        if origin.host and len(hit.hosts) < MAX_NAMES:
            hit.hosts.add(origin.host)


class _Fields(dict[str, str]):
    """Template fields: a missing group reads as '?' rather than raising."""

    def __missing__(self, key: str) -> str:
        return "?"


def _fields(hit: Hit) -> _Fields:
    g = _Fields(hit.groups)
    # Patterns for several versions of one message use numbered aliases (reason2, ...).
    if "reason" not in g and "reason2" in g:
        g["reason"] = g["reason2"]
    g["peer_text"] = f" (from {g['peer']})" if "peer" in g else ""
    g["addr_text"] = f" (remote {g['addr']})" if "addr" in g else ""
    g["dup_text"] = (
        f": rank {g['a']} and rank {g['b']} on CUDA device {g['dev']}"
        if "a" in g and "dev" in g
        else ""
    )
    g["ver_text"] = f" ({g['va']} vs {g['vb']})" if "va" in g else ""
    return g


def to_finding(hit: Hit, first: Hit | None) -> Finding:
    """The Finding for one signature hit; a consequence points at the first failure."""
    sig = hit.signature
    summary = sig.summary.format_map(_fields(hit))
    where = hit.origin.label()
    if where:
        summary += f" [{where}]"
    if sig.secondary and first is not None and first is not hit:
        label = first.origin.label()
        summary += f"; first failure: {first.signature.code}" + (f" on {label}" if label else "")
    nodes = tuple(sorted(hit.hosts))
    data: dict[str, Any] = {
        "count": hit.count,
        "first_seen": f"{hit.source}:{hit.line_no}",
        "meaning": sig.meaning,
        "causes": list(sig.causes),
        "link": sig.link,
        "source": sig.source,
        "secondary": sig.secondary,
    }
    if hit.ranks:
        data["ranks"] = sorted(hit.ranks)
    if hit.origin.time is not None:
        data["time"] = hit.origin.time
    return Finding(
        code=sig.code,
        severity=sig.severity,
        summary=summary,
        nodes=nodes,
        evidence=tuple(hit.evidence),
        fix=Fix(sig.fix.text, sig.fix.commands),
        data=data,
        check="explain",
    )


def findings(result: Explanation) -> list[Finding]:
    """Findings in the order things happened."""
    first = result.first_error()
    return [to_finding(h, first) for h in result.ordered()]


def context(result: Explanation) -> dict[str, Any]:
    """What the logs told about the job, whatever failed."""
    first = result.first_error()
    doc: dict[str, Any] = {
        "sources": result.sources,
        "lines": result.lines,
        "hosts": sorted(result.hosts),
        "ranks": sorted(result.ranks),
        "first_error": None,
    }
    if first is not None:
        doc["first_error"] = {
            "code": first.signature.code,
            "at": f"{first.source}:{first.line_no}",
            "rank": first.origin.rank,
            "host": first.origin.host,
            "time": first.origin.time,
        }
    if not result.nccl.is_empty():
        doc["nccl"] = result.nccl.to_json()
    if result.errors:
        doc["read_errors"] = result.errors
    return doc


def explain(names: Iterable[str], scanner: Scanner | None = None) -> Explanation:
    """Scan every named log (``-`` is stdin).

    A log that cannot be opened raises LogReadError; one that breaks part-way (a truncated
    gzip) keeps what was read and is noted in ``errors``.
    """
    scanner = scanner or Scanner()
    result = scanner.result
    for name in names:
        stream = open_log(name)
        result.sources.append(name)
        line_no = 1
        try:
            for batch in iter_chunks(stream, name):
                scanner.feed_lines(batch, name, line_no)
                line_no += len(batch)
        except LogReadError as exc:
            result.errors.append(str(exc))
        finally:
            if name != "-":
                stream.close()
    return result
