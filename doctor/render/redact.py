"""Mask hostnames, addresses and user names in every output, the same way in every format.

One Redactor is built per report and used by every renderer of that run, so ``gpu-07`` is
``host2`` in the terminal, the JSON, the JUnit XML and the Markdown alike. Hosts are numbered in
inventory order and addresses in the order the JSON report mentions them, so two renderings of
one report give the same aliases. Loopback and unspecified addresses are kept: they identify
nobody, and "Gloo bound to 127.0.1.1" is often the very diagnosis; so are ``root`` and
``localhost``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import hostlist

from doctor.core.nodeset import compact, is_address

if TYPE_CHECKING:
    from doctor.judge.report import Report

# A name is a whole token: not part of a longer word (``node1`` is not in ``node10``).
_EDGE_BEFORE = r"(?<![A-Za-z0-9_])"
_EDGE_AFTER = r"(?![A-Za-z0-9_])"
_HWADDR = r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{2}:){5,19}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:])"
_IPV6 = r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![0-9A-Fa-f:])"
_IPV4 = r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9]|\.[0-9])"
_NODESET = r"[A-Za-z0-9_.-]*\[[0-9,\-]+\][A-Za-z0-9_.-]*"
_ANSI = re.compile(r"(\x1b\[[0-9;]*[A-Za-z])")
_ADDRESS_RE = re.compile(f"(?P<hw>{_HWADDR})|(?P<v6>{_IPV6})|(?P<v4>{_IPV4})")

# Environment variables that name the user a node's probe ran as.
USER_VARS = ("USER", "LOGNAME", "SUDO_USER")
# Keys under which any fact area or report section names a host or a user (peers in /etc/hosts,
# ssh_config entries, ...), so areas added later are redacted without changes here.
HOST_KEYS = frozenset({"hostname", "fqdn", "host", "peer", "hosts", "peers"})
USER_KEYS = frozenset({"user", "username", "login"})
_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")

# Names that identify nobody, kept like loopback addresses ("?" is an unreadable hostname).
KEPT_NAMES = frozenset({"root", "localhost", "localhost.localdomain", "?", ""})


def _is_kept(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or ip.is_unspecified


class Redactor:
    """Consistent aliases for known hosts and users, and for any address in the text."""

    def __init__(self, hosts: Iterable[Iterable[str]], users: Iterable[str]) -> None:
        """``hosts``: one group of names per host (node name, hostname, FQDN) sharing an alias."""
        groups = [[n for n in dict.fromkeys(g) if n not in KEPT_NAMES] for g in hosts]
        user_list = [u for u in dict.fromkeys(users) if u not in KEPT_NAMES]
        self._secrets = {n.lower() for g in groups for n in g} | {u.lower() for u in user_list}
        self._names: dict[str, str] = {}
        self._counters: dict[str, int] = {}
        self._prefixes: dict[str, str] = {}
        for group in groups:
            if not group or any(n.lower() in self._names for n in group):
                continue
            alias = self._next("host")
            for n in group:
                self._names[n.lower()] = alias
        for user in user_list:
            self._names.setdefault(user.lower(), self._next("user"))
        self._addresses: dict[str, str] = {}
        names = sorted(self._names, key=len, reverse=True)
        token = "|".join(re.escape(n) for n in names) or r"(?!x)x"
        self._name_re = re.compile(f"{_EDGE_BEFORE}(?:{token}){_EDGE_AFTER}", re.IGNORECASE)
        self._all_re = re.compile(
            f"(?P<set>{_NODESET})|{_ADDRESS_RE.pattern}|(?P<name>{self._name_re.pattern})",
            re.IGNORECASE,
        )

    @classmethod
    def for_report(cls, report: Report) -> Redactor:
        """Every host and user the report's facts name; addresses numbered as the JSON has them."""
        cluster = report.cluster
        groups: dict[str, list[str]] = {name: [name] for name in cluster.names}
        users: list[str] = []
        facts = list(cluster.nodes.items())
        if cluster.baseline is not None:
            facts.append((cluster.baseline.node, cluster.baseline))
            groups.setdefault(cluster.baseline.node, [cluster.baseline.node])
        for name, node in facts:
            for hostname in (getattr(node.system, "hostname", None), node.capture.value("fqdn")):
                if isinstance(hostname, str) and hostname not in KEPT_NAMES:
                    groups[name] += [hostname, hostname.split(".")[0]]
            env = node.env if isinstance(node.env, dict) else {}
            users += [env[v] for v in USER_VARS if isinstance(env.get(v), str)]
            account = node.capture.value("user")
            if isinstance(account, dict) and isinstance(account.get("home"), str):
                users.append(PurePosixPath(account["home"]).name)
        for name, entry in cluster.inventory.items():
            if entry.user:
                users.append(entry.user)
            if entry.address and not is_address(entry.address):
                groups.setdefault(name, [name]).append(entry.address)
        doc = report.to_json()
        known = {n.split(".")[0].lower(): key for key, g in groups.items() for n in g}
        for key, value in _keyed_strings(doc):
            if key in USER_KEYS:
                users.append(value)
            elif _HOSTNAME.fullmatch(value) and not is_address(value):
                # Another name of a node we know (its FQDN) joins that node's alias.
                owner = known.get(value.split(".")[0].lower(), value)
                groups.setdefault(owner, [owner]).append(value)
        redactor = cls(groups.values(), users)
        redactor.text(json.dumps(doc, default=str))  # number addresses in order
        return redactor

    def _next(self, kind: str) -> str:
        """The next alias of a kind, never one that is itself a secret (or has one as prefix)."""
        if kind not in self._prefixes:
            prefix = kind
            while prefix in self._secrets:
                prefix += "x"
            self._prefixes[kind] = prefix
        while True:
            self._counters[kind] = self._counters.get(kind, 0) + 1
            alias = f"{self._prefixes[kind]}{self._counters[kind]}"
            if alias not in self._secrets:
                return alias

    def _address(self, kind: str, text: str) -> str:
        key = text.lower()
        if key not in self._addresses:
            self._addresses[key] = self._next(kind)
        return self._addresses[key]

    def _replace(self, m: re.Match[str]) -> str:
        text = m.group(0)
        if m.group("set") is not None:
            return self._nodeset(text)
        if m.group("name") is not None:
            return self._names[text.lower()]
        if m.group("hw") is not None:
            return self._address("mac", text)
        try:
            if _is_kept(text):
                return text
        except ValueError:  # looked like an address but is not one (a time, a version)
            return self._names_only(text)
        return self._address("ipv6" if m.group("v6") is not None else "ipv4", text)

    def _nodeset(self, text: str) -> str:
        """``node[1-2]`` → ``host[1-2]``; a bracketed group of unknown names keeps its shape."""
        try:
            expanded = hostlist.expand_hostlist(text)
        except hostlist.BadHostlist:
            expanded = []
        if expanded and all(n.lower() in self._names for n in expanded):
            return compact(self._names[n.lower()] for n in expanded)
        return self._names_only(text)

    def _names_only(self, text: str) -> str:
        return self._name_re.sub(lambda m: self._names[m.group(0).lower()], text)

    def text(self, value: str) -> str:
        """The string with every known host and user and every address replaced by its alias."""
        # Terminal colour codes end in a letter ("\x1b[2mgpu01"), which would hide the name's
        # start from the token match: redact the text between them, piece by piece.
        pieces = _ANSI.split(value)
        pieces[::2] = [self._all_re.sub(self._replace, p) for p in pieces[::2]]
        return "".join(pieces)

    def value(self, value: Any) -> Any:
        """A JSON value with every string (keys included) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _keyed_strings(value: Any, key: str = "") -> Iterable[tuple[str, str]]:
    """(key, string) for every string under a host or user key anywhere in a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _keyed_strings(v, str(k).lower())
    elif isinstance(value, list):
        for v in value:
            yield from _keyed_strings(v, key)
    elif isinstance(value, str) and value not in KEPT_NAMES and key in HOST_KEYS | USER_KEYS:
        yield key, value
