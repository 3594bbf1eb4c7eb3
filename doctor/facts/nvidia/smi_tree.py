"""`nvidia-smi -q` (text) and `nvidia-smi -q -x` (XML) read into one tree of snake_case keys.

Both print the same report (nvidia-smi(1), "nvidia-smi -q"; the XML per nvsmi_device_v*.dtd):
text indents "Key : value" lines four spaces per level, XML nests elements. Keys become
lower_snake ("Persistence Mode" and <persistence_mode> alike); repeated keys (GPUs, processes)
stay in order. Readers are liberal: junk before and after, tabs, CRLF, indented pastes and a
paste cut short all give what could be read; nothing raises.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_LINE = 4096
MAX_TEXT = 8 << 20  # a -q -x of 16 GPUs is well under 1 MiB; beyond this is not nvidia-smi
_KEY = re.compile(r"[^0-9a-z]+")
# "Product Name        : NVIDIA A100" / "Pending             :" (empty value)
_PAIR = re.compile(r"^(?P<key>[^:]*?\S)\s*:(?:\s+(?P<value>.*?))?\s*$")
_GPU = re.compile(r"^GPU\s+(?P<id>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
LOG_TITLE = "NVSMI LOG"  # "==============NVSMI LOG=============="
_XML_START = re.compile(r"<nvidia_smi_log\b")


def snake(text: str) -> str:
    """'PCIe Generation' → 'pcie_generation'; '<max_link_gen>' names stay as they are."""
    return _KEY.sub("_", text.lower()).strip("_")


@dataclass
class Entry:
    """One key of the report: its value (may be empty) and the keys under it, in order."""

    value: str = ""
    children: list[tuple[str, Entry]] = field(default_factory=list)

    def get(self, *path: str) -> Entry | None:
        """The first entry down a path of keys, or None."""
        here: Entry | None = self
        for key in path:
            here = next((e for k, e in here.children if k == key), None) if here else None
        return here

    def text(self, *path: str) -> str | None:
        """The value at a path, None when absent or empty."""
        entry = self.get(*path)
        return entry.value if entry is not None and entry.value else None

    def all(self, key: str) -> list[Entry]:
        return [e for k, e in self.children if k == key]

    def walk(self) -> Iterator[tuple[str, Entry]]:
        """Every entry below, depth first, with its key."""
        for key, entry in self.children:
            yield key, entry
            yield from entry.walk()


def parse_query_text(text: str) -> Entry:
    """``nvidia-smi -q`` text → a tree whose ``gpu`` children are the GPUs (``id`` = bus id)."""
    root = Entry()
    lines = text[:MAX_TEXT].replace("\r", "").expandtabs(4).split("\n")
    start = next((i for i, line in enumerate(lines) if LOG_TITLE in line), 0)
    # (indent, entry) from the root down; an entry takes children more indented than itself.
    stack: list[tuple[int, Entry]] = [(-1, root)]
    for line in lines[start:]:
        line = line[:MAX_LINE]  # no report line is this long; the regexes stay linear-ish
        body = line.strip()
        if not body or LOG_TITLE in body:
            continue
        indent = len(line) - len(line.lstrip())
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        gpu = _GPU.match(body)
        pair = None if gpu else _PAIR.match(body)
        if gpu:
            key, entry = "gpu", Entry(children=[("id", Entry(gpu.group("id")))])
            del stack[1:]  # a GPU section always hangs from the root, whatever its indent
        elif pair:
            key, entry = snake(pair.group("key")), Entry(pair.group("value") or "")
        elif len(stack) > 1 or root.children:
            key, entry = snake(body), Entry()  # a section title ("PCI", "ECC Errors")
        else:
            continue  # junk before the report (a prompt, a comment)
        if not key:
            continue
        stack[-1][1].children.append((key, entry))
        stack.append((indent, entry))
    return root


def parse_query_xml(text: str) -> Entry:
    """``nvidia-smi -q -x`` → the same tree; a document cut short keeps what came before the cut.

    Entity declarations are refused outright (the real document has none; they are how an XML
    bomb works), so the parser never expands anything.
    """
    text = text[:MAX_TEXT]
    found = _XML_START.search(text)
    if found is None or "<!ENTITY" in text:
        return Entry()
    end = text.find("</nvidia_smi_log>", found.start())
    body = text[found.start() : None if end < 0 else end + len("</nvidia_smi_log>")]
    parser: ET.XMLPullParser = ET.XMLPullParser(events=("start", "end"))
    stack: list[Entry] = []
    root: Entry | None = None
    try:
        parser.feed(body)
        parser.close()
    except ET.ParseError:
        pass  # keep the events read before the error: a truncated paste still says something
    try:
        events: Iterator[Any] = parser.read_events()  # typeshed's tuple type is too narrow
        for event, elem in events:
            if not isinstance(elem, ET.Element):
                continue
            if event == "start":
                entry = Entry(children=[(snake(k), Entry(v)) for k, v in elem.attrib.items()])
                if stack:
                    stack[-1].children.append((snake(elem.tag), entry))
                else:
                    root = entry
                stack.append(entry)
            else:
                stack.pop().value = (elem.text or "").strip()
    except ET.ParseError:
        pass
    return root if root is not None else Entry()
