"""Stream lines out of log files (plain or gzip) with bounded memory, whatever the bytes are."""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from doctor.core.files import open_regular
from doctor.core.printable import say

CHUNK = 1 << 20
# A "line" longer than this (a binary file, a progress bar without newlines) is cut: only its
# first MAX_LINE bytes are read (the Scanner), and only they are carried between reads.
MAX_LINE = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


MAX_FILES = 10000  # files read from the folders named: a job's logs, not a whole file system


class LogReadError(Exception):
    """A log could not be opened or read; the message names it."""


def expand(names: list[str]) -> list[str]:
    """The files to read: each name as given, a folder as every regular file under it (the
    per-rank files of torchrun --log-dir, Slurm's %t outputs, one file per node), hidden ones
    and devices, FIFOs and sockets left out, in order of their paths. A folder that holds no
    file, or cannot be read, is an error naming it (never a silent read of stdin)."""
    out: list[str] = []
    for name in names:
        if name == "-" or not os.path.isdir(name):
            out.append(name)
            continue
        found: list[str] = []

        def unreadable(exc: OSError, name: str = name) -> None:
            raise LogReadError(f"{exc.filename or name}: {exc.strerror or exc}")

        for top, folders, files in os.walk(name, onerror=unreadable):
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            for path in (os.path.join(top, f) for f in files if not f.startswith(".")):
                if os.path.isfile(path):  # what a link names, too
                    found.append(path)
                else:
                    say(f"{path}: a device, FIFO, socket or broken link, not read")
            if len(found) > MAX_FILES:
                raise LogReadError(f"{name}: more than {MAX_FILES} files; name the job's logs")
        if not found:
            raise LogReadError(f"{name}: no files in it")
        out.extend(sorted(found))
    return out


def open_log(name: str) -> BinaryIO:
    """Open ``name`` (``-`` is stdin) for reading, decompressing gzip by its magic bytes; a
    device, FIFO or socket named as a log is refused (/dev/zero never ends)."""
    try:
        # Both are BufferedReaders, whose peek() shows the magic bytes without consuming them.
        buffered = sys.stdin.buffer if name == "-" else open_regular(name)
    except OSError as exc:
        raise LogReadError(f"{name}: {exc.strerror or exc}") from None
    if not isinstance(buffered, io.BufferedReader):
        raise LogReadError(f"{name}: not a readable byte stream")
    try:
        head = buffered.peek(2)[:2]
    except OSError as exc:
        raise LogReadError(f"{name}: {exc.strerror or exc}") from None
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[return-value]
    return buffered


def iter_blocks(stream: BinaryIO, name: str = "log", limit: int | None = None) -> Iterator[bytes]:
    """Yield blocks of whole lines, each ending with a newline (but the last line of the stream
    when it has none), reading at most CHUNK bytes at a time, and at most ``limit`` bytes in all
    when given (one part of a file).

    A line unfinished at the end of a read is carried to the next block; past MAX_LINE bytes
    the rest of it, up to its newline, is dropped, so memory stays bounded on an endless line.
    """
    # read1 returns what is decompressed so far, so a truncated gzip still yields its head.
    read = getattr(stream, "read1", stream.read)
    left = limit
    carry = b""  # the unfinished last line (at most MAX_LINE bytes of it)
    cut = False  # the unfinished line is over-long: drop its bytes until the next newline
    while True:
        try:
            want = CHUNK if left is None else min(CHUNK, left)
            block = read(want) if want else b""
        except (OSError, EOFError, zlib.error) as exc:
            if carry:
                yield carry
            raise LogReadError(f"{name}: {exc}") from None
        if not block:
            break
        if left is not None:
            left -= len(block)
        end = block.rfind(b"\n")
        if end < 0:
            if not cut:
                carry += block
                if len(carry) > MAX_LINE:
                    carry, cut = carry[:MAX_LINE], True
            continue
        yield carry + block[block.find(b"\n") if cut else 0 : end + 1]
        carry, cut = block[end + 1 :], False
        if len(carry) > MAX_LINE:
            carry, cut = carry[:MAX_LINE], True
    if carry:
        yield carry
