"""Logs stream in bounded pieces: plain, gzip, truncated gzip, endless lines."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from doctor.explain.scan import explain
from doctor.explain.source import MAX_LINE, LogReadError, iter_blocks, open_log
from tests.explain.fixtures import LOGS, body

SSH = body(LOGS / "real/ssh-permission-denied.log")


def all_lines(data: bytes) -> list[bytes]:
    text = b"".join(iter_blocks(io.BytesIO(data)))
    return text.removesuffix(b"\n").split(b"\n") if text else []


def test_lines_survive_chunk_boundaries() -> None:
    data = b"".join(b"line %d\n" % i for i in range(300_000))
    assert all_lines(data) == [b"line %d" % i for i in range(300_000)]


def test_an_endless_line_is_cut_not_kept() -> None:
    got = all_lines(b"x" * (5 * MAX_LINE + 3 * (1 << 20)) + b"\nafter\n")
    assert got == [b"x" * MAX_LINE, b"after"]


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(SSH)
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(SSH))
    codes = [
        [h.signature.code for h in explain([str(tmp_path / n)]).ordered()]
        for n in ("a.log", "a.log.gz")
    ]
    assert codes[0] == codes[1] == ["ssh.permission_denied"]


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    data = SSH + b"".join(b"filler %d\n" % (i * 7919 % 1000003) for i in range(60_000))
    (tmp_path / "cut.gz").write_bytes(gzip.compress(data)[:-5000])
    result = explain([str(tmp_path / "cut.gz")])
    assert "ssh.permission_denied" in result.hits
    assert result.errors and "cut.gz" in result.errors[0]


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match=r"nope\.log: No such file"):
        open_log(str(tmp_path / "nope.log"))
