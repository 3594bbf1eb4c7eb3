"""Commands the doctor prints for people to paste, often into a root shell.

A fix's commands are ``Command`` strings, and the only way to make one from values is
``command(template, values...)``: every value (a node's or an interface's name, an address, a
version a node reported, a path) is quoted for a POSIX shell, so that whatever it holds stays one
word of the command the template spells. A value that holds a control character (a newline would
end a ``# comment`` and start a command) withholds the whole command. mypy keeps the rule: a
``Fix`` takes ``Command``s, which an f-string is not (tests/security/test_commands.py reads the
tree for templates built from values).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import NewType

Command = NewType("Command", str)


class Words(str):
    """Words already quoted by this module (``assignments``): put into a command as they are."""


# Any control character, newline and tab included: none belongs in a name on a command line.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
WITHHELD = Command("# withheld: a value in this command holds a control character; check its names")


def command(template: str, *values: object) -> Command:
    """``template`` (``str.format`` fields: ``{}`` or ``{0}``; ``{{`` for a brace) with every
    value quoted, or WITHHELD where a value holds a control character."""
    texts = [str(v) for v in values]
    if any(t == WITHHELD or _CONTROL.search(t) for t in texts):
        return WITHHELD
    return Command(template.format(*(_word(v, t) for v, t in zip(values, texts, strict=True))))


def _word(value: object, text: str) -> str:
    return text if isinstance(value, Words) else shlex.quote(text)


def words(*args: object) -> Words:
    """Several words (``-p 2222 user@host``), each quoted, to fill one field of a template."""
    return Words(" ".join(shlex.quote(str(a)) for a in args))


def assignments(pairs: Iterable[tuple[str, str]], flag: str = "") -> Words:
    """``K=V K2=V2`` (``-x K=V -x K2=V2`` with a flag), every name and value quoted."""
    prefix = f"{flag} " if flag else ""
    return Words(" ".join(f"{prefix}{shlex.quote(k)}={shlex.quote(v)}" for k, v in pairs))


def over_ssh(node: object, template: str, *values: object) -> Command:
    """``ssh NODE 'COMMAND'``: the command (its values quoted) quoted again as one word of ssh's,
    so a value stays one word on the node too."""
    return command("ssh {} {}", node, command(template, *values))


def commands(*texts: str) -> tuple[Command, ...]:
    """Commands written out whole, with no value in them (``ip -br addr``)."""
    return tuple(Command(t) for t in texts)
