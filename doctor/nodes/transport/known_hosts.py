"""known_hosts, read once per run and looked up per host in time linear in the file.

paramiko's ``HostKeys.load`` checks each entry against every earlier one and decodes every key:
quadratic in the file. A login node's ``/etc/ssh/ssh_known_hosts`` often lists every node of the
cluster, and loading 2,000 lines into each of 16 connections took 34-44 s where the run itself
takes 1 s. Here each file is read once, indexed by plain host name; hashed names
(``HashKnownHosts``) are matched for each lookup, as they can only be; and only the keys of the
matching lines are decoded. Matching is paramiko's own: exact names and ``|1|`` hashes, no
patterns; ``@cert-authority`` and ``@revoked`` lines are ignored, as paramiko ignores them. A
line whose key cannot be decoded is skipped, as OpenSSH does (paramiko's load raised on it).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from pathlib import Path

import paramiko

from doctor.core.files import read_bounded

FIELDS = re.compile(r"[ \t]")


MAX_KNOWN_HOSTS = 64 << 20  # bytes: a known_hosts of a hundred thousand hosts


class KnownHosts:
    """Every line of some known_hosts files, by the host names it names."""

    def __init__(self, files: Iterable[Path]) -> None:
        # Lines numbered across the files: of two keys of one type the first one counts.
        self._plain: dict[str, list[tuple[int, str]]] = {}
        self._hashed: list[tuple[list[str], int, str]] = []
        number = 0
        for path in files:
            try:
                text = read_bounded(path, MAX_KNOWN_HOSTS).decode(errors="replace")
            except OSError:  # missing, unreadable, a device: OpenSSH reads on without it too
                continue
            for raw in text.splitlines():
                number += 1
                line = raw.strip()
                if not line or line.startswith(("#", "@")):
                    continue
                names = FIELDS.split(line, 1)[0].split(",")
                hashed = [n for n in names if n.startswith("|1|")]
                if hashed:
                    self._hashed.append((hashed, number, line))
                for name in names:
                    if not name.startswith("|1|"):
                        self._plain.setdefault(name, []).append((number, line))

    def keys_for(self, name: str) -> dict[str, paramiko.PKey]:
        """The keys recorded for ``name`` (``host``, or ``[host]:port`` off port 22) by type;
        of two of one type the first in file order, as paramiko's lookup answers."""
        lines = list(self._plain.get(name, ()))
        lines += [
            (number, line)
            for hashed, number, line in self._hashed
            if any(hmac.compare_digest(paramiko.HostKeys.hash_host(name, h), h) for h in hashed)
        ]
        keys: dict[str, paramiko.PKey] = {}
        for _, line in sorted(lines):
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey):
                continue  # a line that is not a key (bad base64, unknown type): OpenSSH skips it
            if entry is not None:
                keys.setdefault(entry.key.get_name(), entry.key)
        return keys
