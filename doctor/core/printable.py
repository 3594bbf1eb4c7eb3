"""The one output sanitiser: text from outside (log lines, pasted output, node, interface and file
names, error messages that echo them) is shown, never obeyed, by a terminal.

Every C0 and C1 control character but newline and tab (ESC, and so every CSI, OSC, DCS and
hyperlink sequence; BEL, CR, backspace), DEL, and the Unicode bidirectional overrides that
reorder what a reader sees (the "Trojan Source" characters) become visible escapes such as
``\\x1b``. Escaping is idempotent: the escapes are printable. JSON needs none of this (its
encoder escapes control characters), so the JSON report stays exact.
"""

from __future__ import annotations

import re
import sys

# C0 but \t and \n, DEL and C1, and the bidi embeddings, overrides and isolates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as a visible escape."""
    return UNSAFE.sub(_escape, text)


def say(text: str) -> None:
    """One line of the doctor's own on stderr (``doctor: ...``), what it quotes shown safely."""
    sys.stderr.write(f"doctor: {printable(text)}\n")
    sys.stderr.flush()
