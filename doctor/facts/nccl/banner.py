"""Who printed a bare version line: NCCL before 2.9 prints "NCCL version 2.7.8+cuda10.1" once,
with printf on stdout and no "host:pid:tid" prefix, on the host of the rank that calls
ncclGetUniqueId (rank 0). The line's wrapping may still say whose it is: a syslog or journald
host, a Ray worker's pid, a launcher's rank label; the processes of the log then name the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.core.logline import Origin

MAX_SOURCES = 64


@dataclass
class BannerOrigin:
    """What the wrappings of the bare version lines said about who printed them."""

    named: set[str] = field(default_factory=set)  # a host (syslog, journald)
    pids: set[int] = field(default_factory=set)  # Ray's "(Worker pid=N)"
    ranks: set[int] = field(default_factory=set)  # a launcher's label ("[1,0]<stdout>:", "0: ")
    lines: int = 0

    def note(self, origin: Origin) -> None:
        self.lines += 1
        # A host a syslog or journald header names; not a collector's label (a compose
        # service, a Ray worker's address), which need not be the host NCCL names.
        if origin.host is not None and len(self.named) < MAX_SOURCES:
            self.named.add(origin.host)
        if origin.pid is not None and len(self.pids) < MAX_SOURCES:
            self.pids.add(origin.pid)
        if origin.rank is not None and len(self.ranks) < MAX_SOURCES:
            self.ranks.add(origin.rank)

    def absorb(self, later: BannerOrigin) -> None:
        self.named |= later.named
        self.pids |= later.pids
        self.ranks |= later.ranks
        self.lines += later.lines

    def hosts(self, launcher_hosts: dict[int, str], pid_hosts: dict[int | None, str]) -> list[str]:
        """The hosts the bare lines came from: named by their wrapping, or by the process of
        the same pid or launcher rank; a log whose processes are all on one host, that one."""
        if not self.lines:
            return []
        found = set(self.named)
        found |= {pid_hosts[p] for p in self.pids if p in pid_hosts}
        found |= {launcher_hosts[r] for r in self.ranks if r in launcher_hosts}
        if not found and len(set(pid_hosts.values())) == 1:
            found = set(pid_hosts.values())
        return sorted(found)
