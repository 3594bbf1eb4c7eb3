"""A Flight Recorder dump file read as plain values (doctor/facts/hang/flight_dump.py, through
``read_flight_dump``): real dumps of a Gloo job made here and of NCCL ranks on an H200, torch's
JSON form, trimming as the stacks agent trims, and files that are not dumps or are built to
hurt; and the agent, which ships the same reader above its own source."""

from __future__ import annotations

import ast
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.explain.hang.verdicts import read_flight_dump
from doctor.facts.hang.flight import collectives
from doctor.facts.hang.flight_dump import ENTRIES_KEPT, FRAMES_KEPT
from doctor.stages.stacks import agent_source

FIXTURES = Path(__file__).parents[2] / "fixtures"
TOOLS = FIXTURES / "logs" / "hang" / "tools"
H200 = FIXTURES / "gpu" / "h200"


def dump(path: Path) -> dict[str, object]:
    doc = read_flight_dump(path.read_bytes())
    assert doc is not None, path
    return doc


def ops(doc: dict[str, object]) -> dict[int, str]:
    return {seq: c.op for seq, c in collectives(doc)["0"].items()}  # type: ignore[arg-type]


def test_a_gloo_ranks_dump_made_here() -> None:
    """torch 2.13 records Gloo's collectives: three allreduces, the fourth enqueued (rank 2
    skipped it; rank 1 of the other job broadcast instead)."""
    assert ops(dump(TOOLS / "gloo-skip" / "rank_0")) == dict.fromkeys(range(1, 5), "all_reduce")
    skipped = dump(TOOLS / "gloo-skip" / "rank_2")
    assert ops(skipped) == dict.fromkeys(range(1, 4), "all_reduce")
    assert skipped["pg_status"] == {
        "0": {"last_enqueued_collective": 3, "last_started_collective": -1,
              "last_completed_collective": 3}
    }  # fmt: skip
    assert ops(dump(TOOLS / "gloo-op" / "rank_1"))[4] == "broadcast"
    entry = dump(TOOLS / "gloo-op" / "rank_1")["entries"][-1]  # type: ignore[index]
    assert entry["process_group"] == ["0", "default_pg"]  # a tuple in the pickle
    assert entry["frames"][0]["name"] == "broadcast"


def test_torchs_json_dump_reads_like_its_pickle() -> None:
    doc = dump(TOOLS / "gloo-skip" / "rank_0.json")
    assert ops(doc) == ops(dump(TOOLS / "gloo-skip" / "rank_0"))
    assert doc["pg_status"]["0"]["last_enqueued_collective"] == "4"  # type: ignore[index]


@pytest.mark.parametrize("mode", ["sleep", "op", "size", "kill"])
def test_real_nccl_dumps_of_an_h200(mode: str) -> None:
    doc = dump(H200 / f"hang-{mode}" / "fr_0")
    assert doc["version"] == "2.10" and doc["entries_total"] == 4
    assert ops(doc) == dict.fromkeys(range(1, 5), "all_reduce")


def test_a_long_dump_is_trimmed_as_the_agent_trims() -> None:
    frames = [{"name": f"f{i}", "filename": "x.py", "line": i} for i in range(40)]
    entries = [
        {"process_group": (str(g), "pg"), "collective_seq_id": i, "frames": list(map(dict, frames))}
        for g in (0, 1)
        for i in range(1, 31)
    ]
    doc = read_flight_dump(pickle.dumps({"version": "2.10", "entries": entries}, protocol=2))
    assert doc is not None and doc["entries_total"] == 60
    kept = doc["entries"]
    assert len(kept) == 2 * ENTRIES_KEPT
    assert [e["collective_seq_id"] for e in kept[:ENTRIES_KEPT]] == list(range(15, 31))
    assert all(len(e["frames"]) == FRAMES_KEPT for e in kept)


def test_a_pickle_that_names_anything_is_not_read() -> None:
    assert read_flight_dump(pickle.dumps({"entries": [], "x": Path("/")}, protocol=2)) is None
    assert read_flight_dump(pickle.dumps({"entries": [], "x": shutil.rmtree}, protocol=2)) is None
    assert read_flight_dump(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.") is None


def test_shared_lists_that_would_grow_without_end_are_refused_at_once() -> None:
    """A list named twice, 60 times over, is 2**60 values once copied: refused, not copied."""
    nested: list[object] = []
    for _ in range(60):
        nested = [nested, nested]
    data = pickle.dumps({"version": "2.10", "entries": nested}, protocol=2)
    assert len(data) < 2000 and read_flight_dump(data) is None


def test_nesting_deeper_than_a_dump_is_refused() -> None:
    depth = 100_000
    data = b"\x80\x02}X\x07\x00\x00\x00entries" + b"]" * depth + b"a" * (depth - 1) + b"s."
    assert read_flight_dump(data) is None
    assert read_flight_dump(b'{"entries": ' + b"[" * depth + b"]" * depth + b"}") is None


def test_what_is_not_a_dump_is_none() -> None:
    for data in (b"", b"\x80", b"{}", b"[1, 2]", b'{"entries": 3}', "é".encode("latin-1"),
                 (TOOLS / "README.md").read_bytes(), pickle.dumps([1, 2], protocol=2)):  # fmt: skip
        doc = read_flight_dump(data)
        assert doc is None or doc["entries"] == [], data[:20]


def test_a_dump_cut_anywhere_is_none() -> None:
    data = (H200 / "hang-op" / "fr_1").read_bytes()
    for end in range(len(data)):
        assert read_flight_dump(data[:end]) is None
    text = (TOOLS / "gloo-skip" / "rank_0.json").read_bytes()
    for end in range(0, len(text), 7):
        assert read_flight_dump(text[:end]) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"", b"\x80\x02", b"\x80\x04", b"{"]))
def test_garbage_never_raises(data: bytes, head: bytes) -> None:
    doc = read_flight_dump(head + data)
    assert doc is None or isinstance(doc["entries"], list)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2000), st.integers(0, 255))
def test_a_real_dump_with_one_byte_changed_never_raises(at: int, byte: int) -> None:
    data = bytearray((H200 / "hang-sleep" / "fr_0").read_bytes())
    data[at % len(data)] = byte
    doc = read_flight_dump(bytes(data))
    assert doc is None or json.dumps(doc, default=str)


def test_the_agent_ships_the_same_reader() -> None:
    """The stacks agent goes as one file: this reader's source, then the agent's, valid on
    Python 3.8; it reads a dump as ``doctor explain`` does."""
    source = agent_source()
    ast.parse(source, feature_version=(3, 8))
    shipped: dict[str, object] = {"__name__": "doctor-stacks"}
    exec(compile(source, "doctor-stacks", "exec"), shipped)
    data = (H200 / "hang-op" / "fr_1").read_bytes()
    assert shipped["read_dump"](data) == read_flight_dump(data)  # type: ignore[operator]


def python38() -> str | None:
    """A Python 3.8 that runs (a pyenv shim may name one that is not selected)."""
    found = [
        shutil.which("python3.8"),
        *map(str, Path(sys.base_prefix).parent.glob("3.8*/bin/python3.8")),
    ]
    for python in filter(None, found):
        if subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0:
            return python
    return None


PYTHON38 = python38()


@pytest.mark.skipif(PYTHON38 is None, reason="no Python 3.8 here")
def test_the_shipped_reader_runs_on_python_3_8(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_bytes(agent_source())
    code = (
        "import json, sys; ns = {'__name__': 'shipped'}; "
        "exec(compile(open(sys.argv[1], 'rb').read(), 'agent', 'exec'), ns); "
        "print(json.dumps(ns['read_dump'](open(sys.argv[2], 'rb').read())))"
    )
    dumped = H200 / "hang-op" / "fr_1"
    done = subprocess.run(
        [str(PYTHON38), "-c", code, str(tmp_path / "agent.py"), str(dumped)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == read_flight_dump(dumped.read_bytes())
