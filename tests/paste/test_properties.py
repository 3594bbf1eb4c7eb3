"""No input breaks the paste reader: arbitrary bytes, invalid UTF-8, huge lines, mangled pastes.

Every answer is a well-formed Capture whose facts parse without a parser crashing, or one
UsageError line. Generated input is built from pieces of the real fixtures, so it reaches the
kinds' regexes and parsers rather than only the "not recognised" path.
"""

from __future__ import annotations

import contextlib
import io
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.capture import Capture
from doctor.core.errors import UsageError
from doctor.facts.node import FACT_AREAS, parse_node
from doctor.paste import KINDS, read_inputs, reader
from tests.paste.pastekit import PASTES

LINES = sorted(
    {
        line
        for path in PASTES.iterdir()
        if path.suffix != ".md" and path.name != "netns-probe.json"
        for line in path.read_text().splitlines()
    }
)
PIECES = sorted({word for line in LINES for word in line.split()})
SECTIONS = ("files", "dirs", "links", "commands", "values")


def read(data: bytes) -> Capture | None:
    """The capture of one paste on stdin, or None for a one-line usage error."""
    try:
        return read_inputs(["-"], stdin_node="n", stdin=io.BytesIO(data))["n"]
    except UsageError as exc:
        assert "\n" not in str(exc) and str(exc)
        return None


def well_formed(cap: Capture) -> None:
    raw: dict[str, Any] = cap.raw
    assert raw["probe"]["source"] == "paste"
    assert all(isinstance(raw[s], dict) for s in SECTIONS)
    facts = parse_node("n", cap)
    for area in FACT_AREAS:
        value = getattr(facts, area)
        # guarded() turns a parser's exception into this reason: none may be raised.
        assert "could not parse" not in str(getattr(value, "reason", "")), (area, value)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes(data: bytes) -> None:
    cap = read(data)
    if cap is not None:
        well_formed(cap)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(LINES),
            st.lists(st.sampled_from(PIECES), max_size=12).map(" ".join),
            st.text(max_size=80),
            st.sampled_from(["$ ip a", "# note", "...", "", "\t", "root@h:~# ibstat", "\x00"]),
        ),
        max_size=60,
    ),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_mangled_pastes(lines: list[str], newline: str) -> None:
    data = newline.join(lines).encode("utf-8", "surrogatepass")
    cap = read(data)
    if cap is not None:
        well_formed(cap)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000))
def test_every_kind_parses_any_text_into_a_fragment(text: str) -> None:
    for kind in KINDS:
        fragment = kind.parse(text)
        assert isinstance(fragment, dict) and set(fragment) <= set(SECTIONS), kind.name


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=512).filter(lambda b: b"\0" not in b))
def test_invalid_utf8_inside_a_real_paste(junk: bytes) -> None:
    data = (PASTES / "netns-ip-a.txt").read_bytes()
    middle = len(data) // 2
    cap = read(data[:middle] + b"\xff\xfe" + junk + data[middle:])
    if cap is not None:
        well_formed(cap)


class Endless(io.RawIOBase):
    """A stream of one endless line, counting what is asked of it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        assert size > 0, "the reader must never ask for everything"
        self.given += size
        return b"2: eth0: <UP> " + b"x" * (size - 14)


def test_a_huge_single_line_is_read_in_bounded_memory() -> None:
    stream = Endless()
    tracemalloc.start()
    try:
        with contextlib.suppress(UsageError):
            read_inputs(["-"], stdin_node="n", stdin=stream)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stream.given == reader.MAX_INPUT_BYTES + 1
    assert peak < 12 * reader.MAX_INPUT_BYTES  # bytes, text and a cut copy: no more


def test_many_short_lines_stay_within_the_input_cap() -> None:
    data = b"NCCL_DEBUG=INFO\n" * (reader.MAX_INPUT_BYTES // 8)
    cap = read(data)
    assert cap is not None and cap.raw["probe"]["truncated"]
    assert cap.value("env") == {"NCCL_DEBUG": "INFO"}
