"""Scan logs for known failure signatures and NCCL context; order what went wrong by time."""

from __future__ import annotations

import mmap
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import compress, count
from typing import NamedTuple

from doctor.core.logline import NOWHERE, Origin, strip_prefixes
from doctor.explain.catalogue import Signature, catalogue
from doctor.explain.culprit import named
from doctor.explain.explanation import (
    MAX_NAMES,
    Explanation,
    add_names,
    context,
    count_names,
    findings,
)
from doctor.explain.hit import MAX_EVIDENCE, MAX_EVIDENCE_CHARS, Hit
from doctor.explain.keywords import KeywordIndex
from doctor.explain.sieve import Seen, Sieve
from doctor.explain.source import MAX_LINE
from doctor.explain.stored import anchors
from doctor.facts.nccl.log import KEYWORDS as NCCL_KEYWORDS

# The Explanation and what is made of it live in explanation.py; scanning code imports them here.
__all__ = ["Explanation", "Hit", "Partial", "Scanner", "context", "findings"]

MAX_MESSAGE = 4096  # characters of a line the signatures are matched against
MAX_CLOCKS = 4096  # (file, rank) pairs whose last timestamp is remembered
MAX_PLANS = 4096  # keyword sets whose candidate signatures are remembered
# Bytes per anchor below which a block is read a distinct line at a time (Scanner._repeated):
# NCCL INFO lines, one anchor each, are about 100 bytes; ordinary text has one every few KB.
REPEATED_DENSITY = 400


def _newlines(buf: bytes | mmap.mmap, lo: int, hi: int) -> int:
    """The newlines in buf[lo:hi] (an mmap has no count: the range is copied, once per line
    that is read, so a file's bytes are counted at most once)."""
    return buf.count(b"\n", lo, hi) if isinstance(buf, bytes) else buf[lo:hi].count(b"\n")


def looks_cut(block: bytes, after: int = 4) -> bool:
    """Whether a file's first line looks like the tail of a cut one: no prefix starts it, and
    one starts most of the few lines after it (a log's lines mostly share their wrapping)."""
    lines = block.split(b"\n", after + 1)[: after + 1]
    if len(lines) < 3 or strip_prefixes(lines[0].decode("utf-8", "replace"))[1] is not NOWHERE:
        return False
    started = [strip_prefixes(x.decode("utf-8", "replace"))[1] is not NOWHERE for x in lines[1:]]
    return sum(started) * 2 > len(started)


@cache
def _keyword_index(keywords: tuple[bytes, ...]) -> KeywordIndex:
    # Scanners over one catalogue (the parts of a parallel scan, every allreduce rank) share it.
    return KeywordIndex(keywords)


Clock = tuple[str, int | None]  # whose time a timestamp tells: (file, rank)


class Replay(NamedTuple):
    """What reading a line did that reading it again must redo: a hit it counted (by how many
    lines it stands for), an NCCL version it tallied, the time its stamp set (the lines after it
    that have none take it), the culprits it named (counted per line, however the log was cut)."""

    hit: Hit | None
    weight: int
    version: tuple[str, str | None] | None
    stamp: tuple[Clock, float] | None
    names: tuple[tuple[str, str], ...] = ()


_UNREAD = Replay(None, 0, None, None)  # what the Seen table answers for a line it does not hold


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
        self._index = _keyword_index(tuple(kw.encode() for kw in by_keyword))
        self.sieve = Sieve(self._index.keywords, anchors())
        self._seen: Seen[Replay] = Seen()
        # Per keyword (by its index): the signatures that list it, and whether NCCL's context
        # parser reads lines holding it.
        self._candidates = tuple(tuple(v) for v in by_keyword.values())
        self._nccl = tuple(kw in NCCL_KEYWORDS for kw in by_keyword)
        # What to try on a line holding a given set of keywords, worked out once per set.
        self._plans: dict[tuple[int, ...], tuple[tuple[int, ...], bool]] = {}
        self.result = Explanation()
        self._order = 0
        # The last timestamp seen per (file, rank): a line without one is taken to be from
        # then, so per-rank blocks of a merged log still order by time.
        self._clock: dict[Clock, float] = {}
        # First sightings made before any timestamp of their (file, rank): the next stamp of
        # that rank bounds when they were printed, so they take it.
        self._untimed: dict[Clock, list[Hit]] = {}
        # The first timestamp per (file, rank): what a part of a log scanned in parallel
        # gives the sightings still waiting for a stamp in the part before it (absorb).
        self._first_stamp: dict[Clock, float] = {}

    def feed_lines(self, lines: list[bytes], source: str, first_line_no: int) -> None:
        """Scan a list of lines (without their newlines); ``first_line_no`` is the 1-based
        number of ``lines[0]``."""
        self.feed_block(b"\n".join(lines) + b"\n" if lines else b"", source, first_line_no)

    def feed_block(
        self,
        block: bytes,
        source: str,
        first_line_no: int,
        anchored: list[tuple[int, int, int]] | None = None,
    ) -> int:
        """Scan a block of whole lines (the last may lack its newline) and return how many it
        held; ``first_line_no`` is the 1-based number of its first line, ``anchored`` the
        sieve's matches in it where they were found ahead (sieve.matched). Only the first
        MAX_LINE bytes of a line are read."""
        if first_line_no == 1 and looks_cut(block):
            self.result.cut_first.add(source)
        if anchored is None:
            anchored = self.sieve.find(block)
        self._sift(block, 0, len(block), anchored, source, (first_line_no, 0, 0))
        lines = block.count(b"\n") + (not block.endswith(b"\n") and len(block) > 0)
        self.result.lines += lines
        return lines

    def feed_mapped(
        self,
        mm: mmap.mmap,
        lo: int,
        hi: int,
        anchored: list[tuple[int, int, int]],
        source: str,
        at_line: tuple[int, int, int],
    ) -> tuple[int, int, int]:
        """Scan bytes [lo, hi) of a mapped file (doctor/explain/mapped.py), a window ending just
        after a newline or cut inside a longer line. ``at_line``: (the number of the line at a
        position counted up to, that position, where the line open at ``lo`` began); the same
        for the next window comes back. The caller counts the lines."""
        if lo == 0 and looks_cut(mm[: min(hi, 1 << 16)]):
            self.result.cut_first.add(source)
        line_no, counted = self._sift(mm, lo, hi, anchored, source, at_line)
        last = mm.rfind(b"\n", lo, hi)
        return line_no, counted, (last + 1 if last >= 0 else at_line[2])

    def _repeated(
        self, buf: bytes | mmap.mmap, lo: int, hi: int, source: str, line_no: int, counted: int
    ) -> tuple[int, int] | None:
        """The whole lines of buf[lo:hi] read a distinct line at a time: split and counted in C,
        each distinct line looked up once, what a line read before did redone as many times as
        it is there. A line not read before is read at its first place, in order, after what the
        stamps before it did. None where most lines are distinct (the sieve's line-by-line
        reading is then cheaper)."""
        lines = buf[lo:hi].split(b"\n")
        times = Counter(lines)
        if len(times) * 4 > len(lines):
            return None
        seen = self._seen.lines
        new: set[bytes] = set()
        stamped: dict[bytes, tuple[Clock, float]] = {}
        for line, n in times.items():
            raw = line[:MAX_LINE]
            replay = seen.get(raw, _UNREAD)
            if replay is _UNREAD:
                if raw and self.sieve.find(raw):
                    new.add(line)
                else:
                    self._seen.remember(raw, None)
            elif replay is not None:
                self._count(replay, n)  # how often: the order of its places changes nothing
                if replay.stamp is not None:
                    stamped[line] = replay.stamp
        if not new:
            self._stamps(lines, stamped)
            return line_no, counted
        first = line_no + _newlines(buf, counted, lo)  # the number of the block's first line
        in_order = new | stamped.keys()
        for i in compress(count(), map(in_order.__contains__, lines)):
            stamp = stamped.get(lines[i])
            if stamp is not None:
                self._stamp(*stamp)
                continue
            raw = lines[i][:MAX_LINE]
            replay = seen.get(raw, _UNREAD)
            if replay is _UNREAD:
                self._seen.remember(raw, self._read(raw, source, first + i))
            elif replay is not None:
                self._replay(replay)
        return first + len(lines) - 1, hi

    def _stamps(self, lines: list[bytes], stamped: dict[bytes, tuple[Clock, float]]) -> None:
        """What the places of stamped lines do where no line between them is read: each clock's
        first stamp here times the sightings that waited for one, its last is its time after."""
        if not stamped:  # nothing to look for: no walk over the block's lines
            return
        keys = {key for key, _ in stamped.values()}
        for order in (lines, reversed(lines)):
            found: set[Clock] = set()
            for line in order:
                stamp = stamped.get(line)
                if stamp is not None and stamp[0] not in found:
                    found.add(stamp[0])
                    self._stamp(*stamp)
                    if found == keys:
                        break

    def _sift(
        self,
        buf: bytes | mmap.mmap,
        lo: int,
        hi: int,
        anchored: list[tuple[int, int, int]],
        source: str,
        at_line: tuple[int, int, int],
    ) -> tuple[int, int]:
        """Read the lines of buf[lo:hi] holding an anchor (``anchored``: the sieve's matches,
        relative to ``lo``) that were not read before; a line read before replays what it did.
        ``at_line``: the number of the line at a position counted up to, that position, and
        where the line open at ``lo`` began. Returns the last (line number, position). Where
        anchors are dense (one every REPEATED_DENSITY bytes: NCCL INFO lines) and the lines
        mostly repeat, the block is read a distinct line at a time (_repeated)."""
        line_no, counted, opened = at_line
        if len(anchored) * REPEATED_DENSITY > hi - lo and opened == lo and buf[hi - 1] == 10:
            done = self._repeated(buf, lo, hi, source, line_no, counted)
            if done is not None:
                return done
        seen = self._seen.lines
        rfind, find = buf.rfind, buf.find
        line_end = -1
        # The hot loop of a 200 MB log: one turn per line holding an anchor, and a dictionary
        # look-up for a line read before.
        for _, at, to in anchored:
            at += lo
            if at < line_end:  # another anchor of the line just taken
                continue
            start = rfind(b"\n", lo, at) + 1 or opened
            line_end = find(b"\n", lo + to, hi)
            if line_end < 0:
                line_end = hi
            if at - start >= MAX_LINE:  # past the part of the line that is read
                continue
            raw = buf[start : line_end if line_end - start <= MAX_LINE else start + MAX_LINE]
            replay = seen.get(raw, _UNREAD)
            if replay is not _UNREAD:
                if replay is not None:
                    self._replay(replay)
                continue
            line_no += _newlines(buf, counted, start)
            counted = start
            self._seen.remember(raw, self._read(raw, source, line_no))
        return line_no, counted

    def _read(self, raw: bytes, source: str, line_no: int) -> Replay | None:
        found = self._index.found(raw)
        return self._scan(raw, found, source, line_no) if found else None

    def _replay(self, replay: Replay) -> None:
        self._count(replay, 1)
        if replay.stamp is not None:
            self._stamp(*replay.stamp)

    def _count(self, replay: Replay, times: int) -> None:
        if replay.hit is not None:
            replay.hit.count += replay.weight * times
            if replay.names:
                count_names(replay.hit.named, ((n, replay.weight * times) for n in replay.names))
        if replay.version is not None:
            self.result.nccl.tally(*replay.version, times)

    def _plan(self, found: tuple[int, ...]) -> tuple[tuple[int, ...], bool]:
        plan = self._plans.get(found)
        if plan is None:
            candidates = tuple(sorted({i for kw in found for i in self._candidates[kw]}))
            plan = (candidates, any(self._nccl[kw] for kw in found))
            if len(self._plans) < MAX_PLANS:
                self._plans[found] = plan
        return plan

    def _scan(self, raw: bytes, found: tuple[int, ...], source: str, line_no: int) -> Replay | None:
        """Read one line holding keywords; what reading it again must redo."""
        candidates, nccl = self._plan(found)
        text, origin = strip_prefixes(raw.decode("utf-8", "replace"))
        stamp = None if origin.time is None else ((source, origin.rank), origin.time)
        origin = self._timed(origin, source)
        self._note_origin(origin)
        tallied = None
        if nccl:
            self.result.nccl.feed(text, origin)
            tallied = self.result.nccl.last_tally
        # Real messages are short; the cut keeps any regex's worst case small on hostile lines.
        head = text[:MAX_MESSAGE]
        hit = None
        names: tuple[tuple[str, str], ...] = ()
        for index in candidates:
            sig = self.signatures[index]
            m = sig.match(head, origin)
            if m is not None:
                names = tuple(named(sig, m)) if sig.culprit else ()
                hit = self._record(sig, names, text, origin, source, line_no, m)
                break
        if hit is None and tallied is None and stamp is None:
            return None
        return Replay(hit, origin.repeat or 1, tallied, stamp, names)

    def _timed(self, origin: Origin, source: str) -> Origin:
        key = (source, origin.rank)
        if origin.time is not None:
            self._stamp(key, origin.time)
            return origin
        when = self._clock.get(key)
        return origin if when is None else origin._replace(time=when)

    def _stamp(self, key: Clock, when: float) -> None:
        """A line of ``key`` stamped ``when``: the time of the lines after it that have none,
        and of the sightings before it that waited for one."""
        if key in self._clock or len(self._clock) < MAX_CLOCKS:
            self._clock[key] = when
            self._first_stamp.setdefault(key, when)
        for hit in self._untimed.pop(key, ()):
            hit.origin = hit.origin._replace(time=when)

    def _note_origin(self, origin: Origin) -> None:
        if origin.host and len(self.result.hosts) < MAX_NAMES:
            self.result.hosts.add(origin.host)
        if origin.rank is not None and len(self.result.ranks) < MAX_NAMES:
            self.result.ranks.add(origin.rank)

    def _record(
        self,
        sig: Signature,
        names: tuple[tuple[str, str], ...],
        text: str,
        origin: Origin,
        source: str,
        line_no: int,
        m: re.Match[str],
    ) -> Hit:
        hit = self.result.hits.get(sig.code)
        if hit is None:
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            hit = Hit(sig, groups, origin, source, line_no, self._order)
            hit.on_first_line = line_no == 1 and origin.time is None and not origin.label()
            self._order += 1
            self.result.hits[sig.code] = hit
            if origin.time is None:
                hit.awaits_stamp = True
                self._untimed.setdefault((source, origin.rank), []).append(hit)
        hit.count += origin.repeat or 1  # a line Ray de-duplicated stands for that many
        if (
            len(hit.evidence) < MAX_EVIDENCE
        ):  # first: the strip is worth it only while there is room
            hit.add_evidence(source, line_no, text.strip()[:MAX_EVIDENCE_CHARS])
        if origin.rank is not None and len(hit.ranks) < MAX_NAMES:
            hit.ranks.add(origin.rank)
        if origin.host and len(hit.hosts) < MAX_NAMES:
            hit.hosts.add(origin.host)
        count_names(hit.named, ((name, origin.repeat or 1) for name in names))
        return hit

    def partial(self) -> Partial:
        """What a scanner of one part of a log hands back to be absorbed (picklable)."""
        return Partial(self.result, self._clock, self._untimed, self._first_stamp)

    def absorb(self, part: Partial, line_offset: int) -> None:
        """Take in what a fresh scanner learnt from the lines right after the ones this one
        read, as if it had read them itself: the merge of a log scanned in parallel parts.
        ``line_offset`` is how many lines of the part's file come before the part."""
        mine, theirs = self.result, part.result
        # Sightings here still waiting for a stamp take the part's first one.
        for key in [k for k in self._untimed if k in part.first_stamp]:
            for hit in self._untimed.pop(key):
                hit.origin = hit.origin._replace(time=part.first_stamp[key])
        for hit in sorted(theirs.hits.values(), key=lambda h: h.order):
            key = (hit.source, hit.origin.rank)
            if hit.awaits_stamp and key in self._clock:  # the stamp before the part counts
                hit.origin = hit.origin._replace(time=self._clock[key])
            hit.line_no += line_offset
            hit.on_first_line = hit.on_first_line and not line_offset  # a part's, not the file's
            hit.evidence = [(s, n + line_offset, e) for s, n, e in hit.evidence]
            known = mine.hits.get(hit.signature.code)
            if known is None:
                hit.order = self._order
                self._order += 1
                mine.hits[hit.signature.code] = hit
                continue
            known.count += hit.count
            for source, line_no, said in hit.evidence:
                known.add_evidence(source, line_no, said)
            add_names(known.ranks, hit.ranks)
            add_names(known.hosts, hit.hosts)
            count_names(known.named, hit.named.items())
        for key, hits in part.untimed.items():
            if key not in self._clock:
                waiting = [h for h in hits if mine.hits.get(h.signature.code) is h]
                self._untimed.setdefault(key, []).extend(waiting)
        for key, when in part.clock.items():
            if key in self._clock or len(self._clock) < MAX_CLOCKS:
                self._clock[key] = when
                self._first_stamp.setdefault(key, when)
        mine.lines += theirs.lines
        if not line_offset:  # a part that starts the file
            mine.cut_first |= theirs.cut_first
        add_names(mine.hosts, theirs.hosts)
        add_names(mine.ranks, theirs.ranks)
        mine.nccl.absorb(theirs.nccl)
        mine.errors.extend(theirs.errors)


@dataclass
class Partial:
    """A part's scan, for Scanner.absorb."""

    result: Explanation
    clock: dict[Clock, float]
    untimed: dict[Clock, list[Hit]]
    first_stamp: dict[Clock, float]
