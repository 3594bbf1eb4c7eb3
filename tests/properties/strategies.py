"""Generated text for the parsers: shaped like each format (its fragments, separators and
numbers), mixed with what real inputs carry (CRLF, tabs, comments, prompts, odd Unicode, NUL)."""

from __future__ import annotations

from hypothesis import strategies as st

NOISE = st.sampled_from(
    ["\r\n", "\n", "\t", " ", "  ", "#", "\x00", "\ufeff", "é", "\u2028", "$ ", "...", "\\"]
)


def shaped(fragments: list[str], max_size: int = 40) -> st.SearchStrategy[str]:
    """Text built from a format's own pieces, numbers, noise and arbitrary short text."""
    piece = st.one_of(
        st.sampled_from(fragments),
        NOISE,
        st.integers(-(2**70), 2**70).map(str),
        st.text(max_size=6),
    )
    return st.lists(piece, max_size=max_size).map("".join)


def any_text(fragments: list[str]) -> st.SearchStrategy[str]:
    """Format-shaped text, arbitrary text, or bytes that are not UTF-8 read as a tool would."""
    return st.one_of(
        shaped(fragments),
        st.text(max_size=200),
        st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
    )
