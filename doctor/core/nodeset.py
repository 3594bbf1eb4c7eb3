"""Name groups of nodes compactly (``node[03,07-09]``) and find the odd ones out."""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from doctor.core.errors import UsageError

K = TypeVar("K", bound=Hashable)

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compact(names: Iterable[str]) -> str:
    """``node03,node07,node08,node09,gpu-a`` → ``gpu-a,node[03,07-09]`` (zero padding kept)."""
    groups: dict[tuple[str, int], list[str]] = defaultdict(list)
    plain: list[str] = []
    for name in sorted(set(names)):
        m = _NUMBERED.match(name)
        if m:
            groups[(m.group(1), len(m.group(2)))].append(m.group(2))
        else:
            plain.append(name)
    parts = list(plain)
    for (prefix, _width), digits in sorted(groups.items()):
        if len(digits) == 1:
            parts.append(prefix + digits[0])
            continue
        runs: list[list[str]] = []
        for d in sorted(digits, key=int):
            if runs and int(d) == int(runs[-1][-1]) + 1:
                runs[-1].append(d)
            else:
                runs.append([d])
        spans = [r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs]
        parts.append(f"{prefix}[{','.join(spans)}]")
    return ",".join(sorted(parts))


def group_nodes(values: Mapping[str, K]) -> dict[K, list[str]]:
    """Nodes grouped by their value, in first-seen order of values and of nodes."""
    groups: dict[K, list[str]] = {}
    for node, value in values.items():
        groups.setdefault(value, []).append(node)
    return groups


@dataclass(frozen=True)
class Split(Generic[K]):
    """Nodes grouped by a value: the reference value and the nodes that differ from it."""

    reference: K
    reference_nodes: tuple[str, ...]
    others: dict[K, tuple[str, ...]]


def split_by_value(values: Mapping[str, K], baseline: K | None = None) -> Split[K] | None:
    """Group nodes by value; the reference is the baseline if given, else the majority.

    Returns None when every node agrees (and matches the baseline, if one was given). Ties in the
    vote go to the value whose first node comes first, so the answer is stable.
    """
    groups = group_nodes(values)
    if baseline is None:
        if len(groups) <= 1:
            return None
        reference = max(groups, key=lambda v: len(groups[v]))
    else:
        if set(groups) <= {baseline}:
            return None
        reference = baseline
    return Split(
        reference,
        tuple(groups.get(reference, ())),
        {v: tuple(ns) for v, ns in groups.items() if v != reference},
    )


# A host name: dot-separated labels of letters, digits, '-' and '_' (RFC 1123, with the '_' that
# real clusters use), none starting or ending with '-', 63 bytes a label, 253 in all.
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_SCOPE = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # an IPv6 zone: an interface name or index


def host_problem(name: str) -> str | None:
    """Why ``name`` is not a host name or an address (None when it is one). A node's name reaches
    ssh's argv, file names and printed commands: '-oProxyCommand=...', '../x' and 'a;id' are no
    host anyone has."""
    if is_address(name):
        scope = name.partition("%")[2]
        return None if not scope or _SCOPE.fullmatch(scope) else "its IPv6 zone is not a name"
    if not name or len(name) > 253:
        return "empty or longer than 253 characters"
    if not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return "not a host name (letters, digits, '-', '_' and '.'; no label starts with '-')"
    return None


def check_host(name: str, where: str) -> str:
    """``name`` when it is a host name or an address; a UsageError naming ``where`` otherwise."""
    problem = host_problem(name)
    if problem is not None:
        raise UsageError(f"{where}: {name!r}: {problem}")
    return name


def as_host(text: str) -> str:
    """A file's name made a node's name (``dmesg (2).txt``'s stem → ``dmesg-2``): what a host
    name may not hold becomes '-', so a name read from a folder is always one (never refused:
    the file is the user's, named as it came)."""
    name = ".".join(
        re.sub(r"[^A-Za-z0-9_-]+", "-", label).strip("-")[:63] for label in text.split(".")
    )
    name = ".".join(label for label in name.split(".") if label)[:253].strip(".-")
    return name or "node"


def numbers(spec: str, limit: int) -> list[int]:
    """A list of numbers as launchers write one (srun's tasks: ``3``, ``0-1,3``): at most
    ``limit`` of them, however wide a range it says."""
    out: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            first = int(low)
            last = min(int(high or low), first + limit)
            out.extend(range(first, last + 1))
        if len(out) >= limit:
            break
    return out[:limit]


def is_address(text: str) -> bool:
    """Whether ``text`` is an IPv4 or IPv6 address (not a name)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def name_peers(text: str, owners: Mapping[str, str], own: Iterable[str] = ()) -> str:
    """``text`` with each address a node holds (``owners``: address -> node) named as
    ``node2 (198.18.0.2)``, or ``(node2, 198.18.0.2)`` where the address stood in parentheses.
    Addresses of the ``own`` nodes (the finding's: a node's own interfaces) and of nodes the text
    already names are left as they are."""
    mine = set(own)
    wanted = {a: n for a, n in owners.items() if n not in mine and not _named(text, n)}
    if not wanted:
        return text
    pattern = "|".join(re.escape(a) for a in sorted(wanted, key=len, reverse=True))
    # The address with its port as logs write it ([fd00::2]:99, 10.0.0.2:99, 10.0.0.2<99>), and
    # not inside a longer address or word: 10.0.0.2 is not in 10.0.0.23, nor in eth0:10.0.0.2.
    found = re.compile(
        rf"(\()?(?<![\w.:\[])(\[?({pattern})\]?(?::\d+|<\d+>)?)(?![\w.:]?[0-9A-Za-z])(\))?"
    )

    def named(m: re.Match[str]) -> str:
        node, address = wanted[m[3]], m[2]
        if m[1] and m[4]:
            return f"({node}, {address})"
        return f"{m[1] or ''}{node} ({address}){m[4] or ''}"

    return found.sub(named, text)


def _named(text: str, node: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(node)}(?![\w-])", text) is not None
