"""Users' files, read with a size bound, and report files that appear whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import tempfile
from pathlib import Path

REPORT_MODE = 0o644  # a report is read by others (CI, a web server); written by its owner


class TooLarge(OSError):
    """The file is larger than what it can sensibly be (a wrong path, a binary, a runaway log)."""


class NotRegular(OSError):
    """A device, FIFO or socket where a file was named: /dev/zero never ends, a FIFO with no
    writer never answers."""


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """``path`` opened for reading; NotRegular (without blocking on a FIFO) when it is no
    regular file, whatever a symlink on the way names."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO's far end) cannot be opened
            raise NotRegular(errno.EINVAL, "a device, FIFO or socket, not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "folder" if stat.S_ISDIR(mode) else "device, FIFO or socket"
            raise NotRegular(errno.EINVAL, f"a {kind}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: Path, limit: int) -> bytes:
    """The file's bytes; TooLarge past ``limit``, without reading more than ``limit + 1``;
    NotRegular for a device, FIFO or socket."""
    with open_regular(path) as fh:
        if os.fstat(fh.fileno()).st_size <= limit:
            data = fh.read(limit + 1)
            if len(data) <= limit:
                return data
    raise TooLarge(errno.EFBIG, f"larger than {limit >> 20} MiB, not what it should be")


def inside(folder: Path, name: str, suffix: str) -> Path:
    """``folder/<name><suffix>`` for a file named after a node: ValueError where the name would
    put it elsewhere (a node's name is checked when it is read: this is the second lock)."""
    path = folder / f"{name}{suffix}"
    if path.parent != folder or name in ("", ".", "..") or "/" in name:
        raise ValueError(f"{name!r} cannot name a file in {folder}")
    return path


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` so that a full or read-only disk leaves no truncated
    file behind (nor the one aside); raises the OSError that stopped it. The file aside is made
    new under a name no one can guess (a fixed ``.name.part`` in /tmp could be a link someone
    planted to /etc/passwd, and the doctor runs as root); the report replaces ``path`` itself,
    never what a link there names."""
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), REPORT_MODE)
            out.write(text)
        os.replace(aside, path)
    except OSError:
        with contextlib.suppress(OSError):  # a read-only folder refuses the unlink too
            os.unlink(aside)
        raise
