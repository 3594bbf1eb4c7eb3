"""What nodes send back: srun's framed output, the mesh agent's links, the reach agent's final
line, and `nvidia-smi topo -m` text pasted by a user. Anything reads as a result or a clear
refusal, never an exception."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from doctor.facts.network.mesh import link_of
from doctor.facts.network.reach import done_event
from doctor.facts.topo.smi_text import TopoParseError, parse_topo_text
from doctor.nodes.transport import ExecResult
from doctor.nodes.transport.srun import TAG, split_frames
from tests.properties.counting import counted
from tests.properties.strategies import any_text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
DEEP = "[" * 100_000 + "]" * 100_000  # nesting past the JSON decoder's recursion limit


def frames(node: str, rc: int, out: bytes, err: bytes) -> list[bytes]:
    """One node's answer framed the way the srun wrapper frames it
    (doctor/nodes/transport/srun.py)."""
    po, pe = zlib.compress(out), zlib.compress(err)
    lines = [f"{TAG} {node} rc {rc} 0.5", f"{TAG} {node} out {base64.b64encode(po).decode()}"]
    lines += [f"{TAG} {node} err {base64.b64encode(pe).decode()}"]
    lines += [f"{TAG} {node} end {hashlib.sha256(po + pe).hexdigest()}"]
    return [ln.encode() for ln in lines]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["node1", "n2"]), min_size=1, max_size=3),
    st.binary(max_size=300),
    st.lists(
        st.one_of(
            st.binary(max_size=80),
            any_text([TAG, " rc ", " out ", " end ", "node1"]).map(
                lambda t: t.encode("utf-8", "surrogateescape")
            ),
        ),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
@counted("srun frames")
def test_split_frames(nodes: list[str], payload: bytes, noise: list[bytes], rnd) -> None:
    lines = [ln for n in nodes for ln in frames(n, 0, payload, b"")]
    if rnd.random() < 0.5 and lines:  # damage one line: cut it, or flip a byte
        i = rnd.randrange(len(lines))
        cut = rnd.randrange(len(lines[i]) + 1)
        lines[i] = (
            lines[i][:cut] if rnd.random() < 0.5 else lines[i][:cut] + b"#" + lines[i][cut + 1 :]
        )
    mixed = lines + noise
    rnd.shuffle(mixed)
    result = split_frames(b"\n".join(mixed))
    for node, got in result.items():
        assert isinstance(node, str)
        assert isinstance(got, str) or (isinstance(got, ExecResult) and got.stdout == payload)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["target", "rc", "error", "seconds", "stderr"]), JSON))
@counted("mesh agent link")
def test_link_of(entry: dict) -> None:
    link = link_of("node1", entry)
    assert link is None or (link.target == entry["target"] and isinstance(link.status, str))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            JSON.map(json.dumps),
            st.fixed_dictionaries({"ev": st.just("done"), "connects": JSON}).map(json.dumps),
            st.text(max_size=40),
        ),
        max_size=6,
    ).map("\n".join)
)
@example(DEEP)
@counted("reach agent final line")
def test_done_event(text: str) -> None:
    doc = done_event(text)
    assert doc is None or (doc["ev"] == "done" and isinstance(doc["connects"], list))


TOPO_PIECES = ["GPU0", "GPU1", "NIC0", "CPU Affinity", "NUMA Affinity", "X", "NV12", "SYS",
               "PIX", "PXB", "NODE", "0-31", "N/A", "\t", "\n", "Legend:", "NIC Legend:",
               "  NIC0: mlx5_0", "\x1b[4m", "\x1b[0m", "GPU NUMA ID"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(any_text(TOPO_PIECES))
@counted("nvidia-smi topo -m text")
def test_topo_text(text: str) -> None:
    try:
        topo = parse_topo_text(text)
    except TopoParseError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert topo is not None
