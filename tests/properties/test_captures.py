"""Probe captures (from a node, or handed back to ``analyze``): every area's parser reads any
text a file or command could hold, and any JSON structure, without breaking; a parser that
raises is a defect even though parse_node would turn it into a Missing area."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.capture import Capture, CaptureError
from doctor.core.errors import UsageError
from doctor.core.model import Missing
from doctor.facts.node import parse_node
from doctor.facts.system import parse_cpu_list
from doctor.paste import read_inputs
from tests.properties.counting import counted
from tests.properties.strategies import NOISE

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def mutate(text: str, data: st.DataObject) -> str:
    """A real capture text, damaged the ways real outputs are: cut, CRLF, tabs, junk spliced in,
    lines dropped or repeated."""
    lines = text.splitlines(keepends=True)
    how = data.draw(st.sampled_from(["cut", "crlf", "tabs", "splice", "drop", "junk"]))
    if how == "cut":
        return text[: data.draw(st.integers(0, len(text)))]
    if how == "crlf":
        return text.replace("\n", "\r\n")
    if how == "tabs":
        return text.replace(" ", "\t")
    if how == "drop" and lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        return "".join(lines[:i] + lines[i + 1 :] + lines[i : i + 1] * 2)
    junk = data.draw(st.lists(st.one_of(NOISE, st.text(max_size=12)), max_size=8).map("".join))
    if how == "junk":
        return junk
    at = data.draw(st.integers(0, len(text)))
    return text[:at] + junk + text[at:]


def no_parser_broke(name: str, raw: dict[str, Any], *, strict: bool = True) -> None:
    """parse_node never raises and its facts serialise; with ``strict``, no area's parser
    raised either (parse_node turns one that does into a Missing area)."""
    facts = parse_node(name, Capture(raw))
    json.dumps(facts.to_json())  # the report can hold it
    if not strict:
        return
    broken = {
        area: value.reason
        for area, value in vars(facts).items()
        if isinstance(value, Missing) and value.reason.startswith("could not parse")
    }
    assert broken == {}


@SETTINGS
@given(st.data())
@counted("probe capture (file and command texts)")
def test_damaged_texts(local_raw: dict[str, Any], data: st.DataObject) -> None:
    raw = copy.deepcopy(local_raw)
    texts = [("files", k, "text") for k, v in raw["files"].items() if "text" in v]
    texts += [("commands", k, "stdout") for k, v in raw["commands"].items() if "stdout" in v]
    for kind, key, field in data.draw(st.lists(st.sampled_from(texts), min_size=1, max_size=6)):
        raw[kind][key][field] = mutate(raw[kind][key][field], data)
    no_parser_broke("node1", raw)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@SETTINGS
@given(st.data())
@counted("probe capture (structure)")
def test_damaged_structure(local_raw: dict[str, Any], data: st.DataObject) -> None:
    raw = copy.deepcopy(local_raw)
    kind = data.draw(st.sampled_from(["files", "commands", "values", "dirs", "links", "probe"]))
    keys = sorted(raw[kind])
    for key in data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4)):
        raw[kind][key] = data.draw(JSON)
    try:
        Capture(raw)
    except CaptureError:
        return
    # An in-process value of the wrong type (a hand-edited capture) may still make its area's
    # parser raise: that area is Missing, the rest of the node is read (not strict).
    no_parser_broke("node1", raw, strict=kind != "values")


@SETTINGS
@given(
    st.lists(
        st.one_of(st.binary(max_size=300), JSON.map(lambda v: json.dumps(v).encode())),
        min_size=1,
        max_size=3,
    )
)
@counted("analyze's capture folder")
def test_capture_folder(tmp_path: Path, files: list[bytes]) -> None:
    folder = tmp_path / "captures"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for i, data in enumerate(files):
        (folder / f"node{i}.json").write_bytes(data)
    try:
        got = read_inputs([str(folder)])
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    # A file that is neither a capture nor any output the reader knows names no node.
    assert set(got) <= {f"node{i}" for i in range(len(files))}
    for name, cap in got.items():
        parse_node(name, cap)


def test_cpu_lists_that_are_not_one_are_missing() -> None:
    assert parse_cpu_list("0-3,8\n") == (0, 1, 2, 3, 8)
    for bad in ("0-#0", "3-1", "0-999999", "x", "0-4294967296"):
        assert isinstance(parse_cpu_list(bad), Missing), bad
