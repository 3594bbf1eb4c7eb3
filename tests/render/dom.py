"""A small element tree of an HTML report (stdlib html.parser), for asserting on its markup
without a browser: elements with their attributes, children and text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "source", "wbr", "col", "area", "base"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    content: list[Element | str] = field(default_factory=list)  # children and text, in order

    @property
    def children(self) -> list[Element]:
        return [c for c in self.content if isinstance(c, Element)]

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        """All text inside, in document order."""
        return "".join(c if isinstance(c, str) else c.text for c in self.content)

    @property
    def own_text(self) -> str:
        """The text directly inside, without its children's (an SVG label, not its tooltip)."""
        return "".join(c for c in self.content if isinstance(c, str))

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(
        self, tag: str | None = None, cls: str | None = None, **attrs: str
    ) -> list[Element]:
        """Descendants (and self) by tag, a class they carry, and exact attribute values
        (``data_source="x"`` matches ``data-source="x"``)."""
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k) == v for k, v in wanted.items())
        ]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one {tag or ''}.{cls or ''} {attrs}, found {len(found)}"
        return found[0]

    def by_id(self, id_: str) -> Element:
        return self.one(id=id_)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].content.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].content.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return
        raise AssertionError(f"</{tag}> closes nothing open")

    def handle_data(self, data: str) -> None:
        self.stack[-1].content.append(data)


def parse(html: str) -> Element:
    """The document's tree; raises AssertionError on an end tag that closes nothing."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    open_tags = [e.tag for e in builder.stack[1:]]
    assert open_tags == [], f"left open: {open_tags}"
    return builder.root
