"""The interface-selection grammars: NCCL's prefix lists, Gloo's exact names, Open MPI's lists.

Each parser mirrors what the library itself does with the text (NCCL never rejects a value; it
reads it its own way), and separately lists what a person most likely got wrong, so the doctor
can predict the library's behaviour *and* say that the value is malformed.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# NCCL: struct netIf { char prefix[64]; int port; } and MAX_IFS = 16 entries
# (src/include/utils.h, src/include/socket.h; parseStringList in src/misc/utils.cc).
NCCL_MAX_TOKENS = 16
NCCL_MAX_TOKEN_LEN = 63


@dataclass(frozen=True)
class IfToken:
    name: str
    port: int = -1  # -1: any port (NCCL_IB_HCA "mlx5_0:1" selects port 1)


@dataclass(frozen=True)
class NcclList:
    """A parsed NCCL_SOCKET_IFNAME / NCCL_IB_HCA value, read exactly the way NCCL reads it."""

    text: str
    exclude: bool  # leading '^'
    exact: bool  # '=' (after an optional '^'): whole names instead of prefixes
    tokens: tuple[IfToken, ...]
    problems: tuple[str, ...] = ()

    def matches(self, name: str, port: int = -1) -> bool:
        # matchIfList(): an empty list matches every name; '^' then inverts the answer.
        if not self.tokens:
            hit = True
        else:
            hit = any(
                (name == t.name if self.exact else name.startswith(t.name))
                and (port == -1 or t.port == -1 or port == t.port)
                for t in self.tokens
            )
        return hit != self.exclude


def parse_nccl_list(text: str) -> NcclList:
    """Parse like ncclOsFindInterfaces() + parseStringList(); never fails, notes problems."""
    problems: list[str] = []
    rest = text
    exclude = rest.startswith("^")
    if exclude:
        rest = rest[1:]
    exact = rest.startswith("=")
    if exact:
        rest = rest[1:]
    if rest.startswith("^"):
        problems.append("'^' after '=' is read as part of a name; write '^=' to exclude names")
    tokens: list[IfToken] = []
    for raw in rest.split(","):
        name, colon, port = raw.partition(":")
        if not name:
            if raw:
                problems.append(f"token {raw!r} has no name before ':'")
            continue
        if name != name.strip():
            problems.append(f"{name!r} has spaces: NCCL compares them literally")
        if len(name) > NCCL_MAX_TOKEN_LEN:
            problems.append(
                f"{name[:20]!r}... is longer than NCCL's {NCCL_MAX_TOKEN_LEN}-byte limit"
            )
        tokens.append(IfToken(name, _atoi(port) if colon else -1))
    if len(tokens) > NCCL_MAX_TOKENS:
        problems.append(f"{len(tokens)} entries: NCCL reads only the first {NCCL_MAX_TOKENS}")
        tokens = tokens[:NCCL_MAX_TOKENS]
    if not tokens:
        problems.append(
            "no interface names in it" + (": it excludes everything" if exclude else "")
        )
    return NcclList(text, exclude, exact, tuple(tokens), tuple(problems))


# C atoi(): C-locale white space, one optional sign, ASCII digits; 0 when there are none.
_ATOI = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")


def _atoi(text: str) -> int:
    """glibc's atoi: (int) strtol(), which saturates at the long range; the cast keeps the low
    32 bits. Longer numbers than a long holds are never converted (int() refuses 4300 digits)."""
    m = _ATOI.match(text)
    if not m:
        return 0
    sign, digits = m.group(1), m.group(2).lstrip("0")
    long_max = (1 << 63) - 1
    value = long_max + 1 if len(digits) > 19 else int(digits or "0")
    value = min(value, long_max + (sign == "-"))
    value = -value if sign == "-" else value
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def nccl_list_active(text: str | None) -> bool:
    """NCCL ignores NCCL_SOCKET_IFNAME values of one character or less (strlen(env) > 1)."""
    return text is not None and len(text) > 1


@dataclass(frozen=True)
class NameList:
    """Gloo's GLOO_SOCKET_IFNAME: comma-separated exact names, one Gloo device each."""

    text: str
    names: tuple[str, ...]
    problems: tuple[str, ...] = ()


def parse_gloo_list(text: str) -> NameList:
    problems = []
    names = tuple(text.split(","))
    if any(not n for n in names):
        problems.append("an empty name between commas: Gloo fails looking it up")
    if text.startswith(("^", "=")):
        problems.append(f"'{text[0]}' is NCCL syntax; Gloo takes exact interface names only")
    if any(n != n.strip() for n in names):
        problems.append("names with spaces never match an interface")
    return NameList(text, names, tuple(problems))


@dataclass(frozen=True)
class MpiToken:
    text: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None  # CIDR form; None for a name


@dataclass(frozen=True)
class MpiList:
    """Open MPI's btl_tcp_if_include/exclude and oob_tcp_if_include: names or CIDR subnets."""

    text: str
    tokens: tuple[MpiToken, ...]
    problems: tuple[str, ...] = ()

    def matches(self, name: str, networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]):
        """Names match exactly; a CIDR must be the interface's own subnet, written precisely."""
        for t in self.tokens:
            if t.network is None and t.text == name:
                return True
            if t.network is not None and t.network in networks:
                return True
        return False


def parse_mpi_list(text: str) -> MpiList:
    problems = []
    tokens = []
    for raw in text.split(","):
        tok = raw.strip()
        if not tok:
            continue
        if "/" in tok:
            try:
                net = ipaddress.ip_network(tok, strict=False)
            except ValueError:
                problems.append(f"{tok!r} is not a CIDR subnet")
                continue
            tokens.append(MpiToken(tok, net))
        else:
            if tok.startswith("^"):
                problems.append(f"{tok!r}: Open MPI lists take no '^'; use the _exclude parameter")
            tokens.append(MpiToken(tok, None))
    if not tokens:
        problems.append("no interface names or subnets in it")
    return MpiList(text, tuple(tokens), tuple(problems))
