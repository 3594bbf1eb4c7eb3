"""``py-spy dump --json`` pasted: an array of threads (src/dump.rs: serde_json's pretty print of
``Vec<StackTrace>``), one per process, over many lines or one, several arrays one after another.

Lines are gathered while the brackets stay open; serde escapes a string's line breaks, so each
line holds whole strings and its brackets can be counted without them. A line that no JSON
line looks like ends the block (a paste cut short, a foreign line): what was gathered is dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

START = re.compile(r"\[\s*(?:\{.*|\])?")
_JSON_LINE = re.compile(r'[\[\]{}"\d-]|true\b|false\b|null\b')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
MAX_CHARS = 8 << 20  # one paste's JSON: py-spy's dump of one process is tens of kilobytes


class JsonBlock:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.depth = 0
        self.size = 0

    def feed(self, text: str) -> bool:
        """Take a line; False where it cannot be one (the block is then void)."""
        if not _JSON_LINE.match(text) or self.size + len(text) > MAX_CHARS:
            return False
        self.parts.append(text)
        self.size += len(text)
        bare = _STRING.sub("", text)
        self.depth += bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")
        return True

    @property
    def closed(self) -> bool:
        return self.depth <= 0

    def arrays(self) -> list[list[dict[str, Any]]]:
        """Each array of threads the block holds (none where it does not decode)."""
        text, found, at = "\n".join(self.parts), [], 0
        decoder = json.JSONDecoder()
        while at < len(text):
            try:
                value, at = decoder.raw_decode(text, at)
            except ValueError:
                break
            if isinstance(value, list) and all(
                isinstance(t, dict) and isinstance(t.get("frames"), list) for t in value
            ):
                found.append(value)
            while at < len(text) and text[at].isspace():
                at += 1
        return found
