"""Split one paste into segments, each the output of one command, and say which kind each is.

A paste is first made to look as the commands printed it: a Markdown quote (``> ``) is peeled
off each line, fence lines (```` ``` ````, ``~~~``) are blanked, and each code block loses the
indentation it was pasted with (``unindent``). Then a line that a kind's ``starts`` recognises
opens a segment of that kind (a segment of the same kind goes on: every interface of ``ip addr``
opens like the first). A shell prompt line
(``$ cmd``, ``user@host:~$ cmd``, ``[root@h ~]# cmd``) closes the segment before it: the output
that follows belongs to the kind its command names (Kind.command: a job's launch), else to
whatever kind recognises its first lines, or to none, so an output that
no kind knows between two known ones is reported on its own and swallows neither.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from doctor.paste.kind import Kind

# A shell prompt that echoes a command: "$ ip a", "root@gpu1:~# ibstat", "[me@h dir]$ env",
# "(venv) me@h:~/x$ mpirun --version", "% ompi_info", and Python's ">>> print(...)".
PROMPT = re.compile(
    r"^\s*(?:>>>|(?:\([^)\s]{1,64}\)\s*)?"
    r"(?:(?:\[[^\]\n]{1,128}\]|[\w.-]{1,64}@[\w.-]{1,128}(?::[^\s$#]*)?|[\w.-]{1,64}:[~/][^\s$#]*)"
    r"\s?)?[$#%])\s+(?P<cmd>[A-Za-z_./][^\n]*)$"
)
# A Markdown quote ("> " before each line of a paste in an issue) is peeled off first.
QUOTE = re.compile(r"^ {0,3}>(?: |$)")
# A Markdown code fence, with or without an info string ("```console", "``` bash {.line}"),
# indented in a list too; a backtick fence's info string holds no backtick (CommonMark).
FENCE = re.compile(r"^\s*(?:`{3,}[^`]*|~{3,}.*)$")

HEAD_LINES = 5  # an XML declaration, a DOCTYPE and a comment before <nvidia_smi_log>

# A bare "# ..." line is a comment people add to a paste, not root's prompt, unless a kind whose
# output has such lines opens there or is open (Kind.hash_lines: nccl-tests); "root@gpu1:~#
# ibstat" is a prompt.
COMMENT = re.compile(r"^\s*#(?:\s|$)")


@dataclass
class Segment:
    """Consecutive lines of one paste, the kind that opened them (None: no kind did)."""

    kind: Kind | None
    first_line: int  # 1-based, in the paste
    lines: list[str] = field(default_factory=list)
    command: str | None = None  # the prompt's command, when one was echoed

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""

    def blank(self) -> bool:
        return not any(line.strip() for line in self.lines)


def _head(segment: Segment) -> bool:
    """A few lines with no kind: the top of the output that follows rather than one of its own."""
    return sum(1 for line in segment.lines if line.strip()) <= HEAD_LINES


def _kind_of(line: str, kinds: Sequence[Kind]) -> Kind | None:
    for kind in kinds:
        if kind.starts(line):
            return kind
    return None


def _kind_of_command(command: str, kinds: Sequence[Kind]) -> Kind | None:
    return next((k for k in kinds if k.command and re.match(k.command, command)), None)


def _margin(lines: list[str]) -> str:
    """The whitespace every non-blank line begins with (tabs and spaces as they are)."""
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    margin = indents[0] if indents else ""
    for indent in indents[1:]:
        while not indent.startswith(margin):
            margin = margin[:-1]
    return margin


def _opens_block(previous: str | None, line: str, kinds: Sequence[Kind]) -> bool:
    """Whether an indented line begins a code block: after a blank line, a fence or a prompt
    (the top of the paste too), as in Markdown; or where it opens an output of a known kind
    once unindented and the line above is none (prose: "Here is ip a:"). Otherwise it belongs
    to the output above it."""
    if previous is None or not previous.strip() or FENCE.match(previous) or PROMPT.match(previous):
        return True
    return _kind_of(line.lstrip(), kinds) is not None and _kind_of(previous, kinds) is None


def unindent(lines: list[str], kinds: Sequence[Kind] = ()) -> list[str]:
    """The lines with fence lines blank and each code block's common indentation removed.

    A block is the inside of a fence, or a run of indented (and blank) lines that a blank line,
    a fence or a prompt opens, or whose first line opens an output of one of ``kinds`` after a
    line that does not: a Markdown code block (4 spaces, a tab), a fenced one indented in a
    list, an output pasted under its prompt or its introduction with a margin. Lines indented
    inside an output (`ifconfig`'s addresses under a name at the margin) follow a line of that
    output and stay as they are; line numbers do not change.
    """
    out = list(lines)
    start: int | None = None  # where the open block begins
    fenced = False

    def close(end: int) -> None:
        if start is not None and (margin := _margin(out[start:end])):
            out[start:end] = [line.removeprefix(margin) for line in out[start:end]]

    for number, line in enumerate(lines):
        if FENCE.match(line):
            close(number)
            out[number] = ""
            fenced = not fenced
            start = number + 1 if fenced else None
        elif fenced:
            continue
        elif start is None:
            previous = lines[number - 1] if number else None
            if line[:1].isspace() and line.strip() and _opens_block(previous, line, kinds):
                start = number
        elif line.strip() and not line[:1].isspace():
            close(number)
            start = None
    close(len(lines))
    return out


def split(text: str, kinds: Sequence[Kind]) -> list[Segment]:
    """The segments of a paste, in order; segments without output (a prompt alone, a comment,
    blank lines) are dropped."""
    segments: list[Segment] = []
    current = Segment(None, 1)
    after_prompt = False  # the current segment began at a prompt and has no kind yet
    lines = [line[q.end() :] if (q := QUOTE.match(line)) else line for line in text.splitlines()]
    for number, line in enumerate(unindent(lines, kinds), 1):
        # "# ..." is a comment, or root's prompt; not where it is a kind's output (nccl-tests
        # prints "# nccl-tests version ...", "#  Rank  0 Group ..." lines).
        hashed = line.lstrip().startswith("#")
        output = hashed and (
            (current.kind is not None and current.kind.hash_lines)
            or _kind_of(line, kinds) is not None
        )
        if COMMENT.match(line) and not output:
            continue
        prompt = None if output else PROMPT.match(line)
        kind = None if prompt else _kind_of(line, kinds)
        if prompt:
            segments.append(current)
            command = prompt.group("cmd").strip()
            current = Segment(_kind_of_command(command, kinds), number, command=command)
            after_prompt = current.kind is None
            continue
        if kind is not None and (current.kind is None or kind.name != current.kind.name):
            if current.kind is None and (after_prompt or _head(current)):
                # The output the prompt announced; or, with no prompt, its own first lines
                # (a table's top border) that no kind recognised.
                current.kind = kind
                if not current.lines:
                    current.first_line = number
            else:
                segments.append(current)
                current = Segment(kind, number)
            after_prompt = False
        current.lines.append(line)
    segments.append(current)
    return [s for s in segments if not s.blank()]
