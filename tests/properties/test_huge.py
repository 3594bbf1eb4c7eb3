"""Huge inputs: a gigabyte on one line, binary, past every size a real input has. Each parser
answers (a result or one clear line) with bounded memory, measured with tracemalloc."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doctor.cli.config import load_config
from doctor.core.errors import UsageError
from doctor.explain.scan import explain
from doctor.facts.topo.smi_text import TopoParseError, parse_topo_text
from doctor.nic.grammar import parse_nccl_list
from doctor.nodes.inventory import parse_hosts_arg, read_hostfile
from doctor.paste import read_inputs
from tests.faults.results import record

GIB = 1 << 30
PEAK_LIMIT = 64 << 20  # bytes of Python memory any of them may hold at once


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` NUL bytes and no newline, taking no disk."""
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def bounded(name: str, size: int, call: Callable[[], Any], *refusals: type[Exception]) -> None:
    tracemalloc.start()
    started = time.monotonic()
    try:
        call()
    except refusals as exc:
        assert str(exc) and "\n" not in str(exc)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    seconds = time.monotonic() - started
    record("huge", {"parser": name, "bytes": size, "peak_mib": round(peak / 2**20, 1),
                    "seconds": round(seconds, 2)})  # fmt: skip
    assert peak < PEAK_LIMIT, (name, peak)


def test_hostfile_of_a_gigabyte_on_one_line(tmp_path: Path) -> None:
    path = sparse(tmp_path / "hosts", GIB)
    bounded("hostfile", GIB, lambda: read_hostfile(path), UsageError)


def test_config_of_a_gigabyte(tmp_path: Path) -> None:
    sparse(tmp_path / "doctor.toml", GIB)
    bounded("TOML config", GIB, lambda: load_config(tmp_path), UsageError)


def test_capture_of_a_gigabyte(tmp_path: Path) -> None:
    sparse(tmp_path / "node1.json", GIB)
    bounded("analyze's capture folder", GIB, lambda: read_inputs([str(tmp_path)]), UsageError)


def test_log_of_a_gigabyte_on_one_line(tmp_path: Path) -> None:
    path = sparse(tmp_path / "rank0.log", GIB)
    # In this process (no parallel parts), so that tracemalloc sees everything it holds.
    bounded("explain (NCCL logs)", GIB, lambda: explain([str(path)], parallel_from=1 << 62))


@pytest.mark.parametrize(
    ("name", "call", "refusals"),
    [
        ("-H host list", parse_hosts_arg, (UsageError,)),
        ("NCCL_SOCKET_IFNAME / NCCL_IB_HCA", parse_nccl_list, ()),
        ("nvidia-smi topo -m text", parse_topo_text, (TopoParseError,)),
    ],
)
def test_text_past_any_real_size(name: str, call: Callable[[str], Any], refusals: tuple) -> None:
    # What a command line or the environment can carry (ARG_MAX is 2 MiB per argument), and
    # pasted text of 8 MiB: bytes that are not UTF-8 arrive as surrogates.
    size = 8 << 20 if name.startswith("nvidia") else 2 << 20
    text = (os.urandom(size // 2).hex())[:size]
    bounded(name, size, lambda: call(text), *refusals)
