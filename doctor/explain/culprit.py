"""Who a signature's lines name as the cause, and who only reported it.

Each signature says who its lines name (signatures.json ``culprit``, catalogue.Signature.blames):
the match's groups, in order, and ``printer``, the process that printed the line, where no group
named anyone. By default a cause or a restatement names its printer (a rank's own CUDA error), a
consequence no one (the watchdog that timed out only waited); an empty list names no one (NCCL's
"unhandled system error" is as often a peer's doing). srun's ``nid007306: task 640: Segmentation
fault`` names its node and task; ``connect to 10.1.2.3<5432> failed`` its peer; the OOM killer's
``Killed process 13159`` the rank the launcher's report gives that pid; an Xid the rank whose GPU
NCCL's comm line puts at that PCI address. A printer that names someone else only reported it
(``reported_by``), as do the ranks a launcher's teardown lists (teardown()).

A peer is named by the address or name the line gives. Where the log's own lines say which host
holds that address (NCCL's ``Bootstrap : Using eth0:10.1.2.3<0>``, ``NET/Socket : Using``, the
IB transport's ``OOB`` interface, each on a line whose prefix names its host, its rank told by
``comm ... rank 3 nranks 8``), the host and, where one process holds it, its rank are named, with
that line as the evidence. An address no line ties to one host is a suspect (``data.suspects``)
but names no node: doctor run ties it to one where the gate saw a node hold it. A loopback or
unspecified address names no one (it is the reporter's own machine or no machine at all).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from doctor.core.nodeset import numbers
from doctor.explain.catalogue import CULPRIT_KINDS, PRINTER, Signature

if TYPE_CHECKING:
    from doctor.explain.hang.exits import Exit
    from doctor.explain.hit import Hit
    from doctor.facts.nccl.log import NcclLog

MAX_TASKS = 4096  # ranks one task list may name
# A peer as logs write it: NCCL's "10.1.2.3<5432>", Gloo's "[10.1.2.3]:5432", "host:port",
# "[fe80::1]:5432", a bare address or name; the sentence's punctuation around it.
_BRACKETED = re.compile(r"^\[(?P<name>[^\]]+)\](?::\d+)?$")
_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[\w.-]{0,251}[A-Za-z0-9])?")


def named(signature: Signature, match: re.Match[str]) -> list[tuple[str, str]]:
    """(kind, value) of each culprit group the match holds: ("node", "node7"), ("rank", "640"),
    ("peer", "10.1.2.3<5432>"); a task list gives a rank each."""
    out: list[tuple[str, str]] = []
    for group in signature.blames:
        value = match.groupdict().get(group) if group != PRINTER else None
        if not value:
            continue
        kind = CULPRIT_KINDS[group]
        if kind == "rank":
            out.extend(("rank", str(n)) for n in numbers(value, MAX_TASKS))
        else:  # a peer without its port: one peer, however many connections to it were lost
            out.append((kind, _name(value) if kind == "peer" else value))
    return out


@dataclass(frozen=True)
class Owner:
    """A host that holds an address, as the log's own lines say."""

    host: str
    ranks: frozenset[int]
    said: str  # the line that says so, as a sentence: "gpu-b's NCCL Bootstrap line"


_NOWHERE = Owner("", frozenset(), "")


def pid_owners(log: NcclLog, exits: Iterable[Exit]) -> dict[int, Owner]:
    """Process id -> the rank and node the log ties it to: a launcher's report of a rank it saw
    killed or crash (torchrun's root cause: ``rank : 1``, ``host : node2``, ``(pid: 13159)``),
    else an NCCL process's prefix and ``comm ... rank`` line (a pid two hosts show is nobody's)."""
    found: dict[int, Owner] = {}
    hosts: dict[int, set[str]] = {}
    for p in log.processes.values():
        if p.pid and p.host:
            hosts.setdefault(p.pid, set()).add(p.host)
            ranks = frozenset() if p.rank is None else frozenset({p.rank})
            found[p.pid] = Owner(p.host, ranks, f"{p.host}'s NCCL lines of pid {p.pid}")
    found = {pid: owner for pid, owner in found.items() if len(hosts[pid]) == 1}
    for end in exits:
        if end.pid:
            said = f"{end.launcher}'s report of rank {end.rank}"
            found[end.pid] = Owner(
                end.node or found.get(end.pid, _NOWHERE).host, frozenset({end.rank}), said
            )
    return found


def bus_id(pci: str) -> int | None:
    """A PCI address as NCCL's busId number: the kernel's "0000:1b:00" (the function left off:
    0) or "0000:1b:00.0", NCCL's "1b000" read back the same way (its hex digits)."""
    digits = pci.strip().lower().replace(":", "").replace(".", "")
    if pci.count(":") == 2 and "." not in pci:
        digits += "0"
    try:
        return int(digits, 16) if digits else None
    except ValueError:
        return None


def gpu_owners(log: NcclLog) -> dict[int, list[Owner]]:
    """NCCL's busId -> the processes whose ``comm ... busId`` line names it, with their host."""
    found: dict[int, list[Owner]] = {}
    for p in log.processes.values():
        bus = bus_id(p.bus_id) if p.bus_id and p.host else None
        if bus is not None and p.host:
            ranks = frozenset() if p.rank is None else frozenset({p.rank})
            found.setdefault(bus, []).append(Owner(p.host, ranks, f"{p.host}'s NCCL comm line"))
    return found


def owners(log: NcclLog) -> dict[str, Owner]:
    """Address -> the one host whose NCCL processes said they use it (an address two hosts
    claim, a container's docker0 or a NAT'ed one, is nobody's)."""
    found: dict[str, dict[str, tuple[set[int], str]]] = {}
    for p in log.processes.values():
        if not p.host:
            continue
        held = [(a, "Bootstrap") for _, a in p.bootstrap]
        held += [(a, "NET/Socket") for _, a in p.socket_ifs]
        if p.ib_oob and (oob := _address(p.ib_oob.partition(":")[2])):
            held.append((oob, "IB OOB"))
        for address, line in held:
            key = _address(address)
            if key is None:
                continue
            ranks = found.setdefault(key, {}).setdefault(p.host, (set(), line))[0]
            if p.rank is not None:
                ranks.add(p.rank)
    return {
        address: Owner(host, frozenset(ranks), f"{host}'s NCCL {line} line")
        for address, hosts in found.items()
        if len(hosts) == 1
        for host, (ranks, line) in hosts.items()
    }


def _name(text: str) -> str:
    """The address or name a peer's text holds, its port taken off."""
    text = text.strip().strip("(),;.'\"")
    text = re.sub(r"<\d+>$", "", text)
    if (m := _BRACKETED.match(text)) is not None:
        return m["name"]
    if _ip(text) is None and text.count(":") == 1:  # host:port (an IPv6 address has several)
        return text.partition(":")[0]
    return text


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _address(text: str) -> str | None:
    """The address ``text`` holds (its port or NCCL's <port> taken off), as one spelling."""
    ip = _ip(_name(text))
    return None if ip is None else str(ip)


@dataclass
class Blame:
    """The culprit a finding names, and who only reported it."""

    nodes: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    reported_nodes: set[str] = field(default_factory=set)
    reported_ranks: set[int] = field(default_factory=set)
    suspects: list[dict[str, Any]] = field(default_factory=list)  # what was named, resolved

    def reported_by(self) -> dict[str, list[Any]] | None:
        nodes = sorted(self.reported_nodes - self.nodes)
        ranks = sorted(self.reported_ranks - self.ranks)
        return {"nodes": nodes, "ranks": ranks} if nodes or ranks else None

    def told(self) -> str:
        """What the log's own lines tied to a host, as a clause: "10.1.2.3 is gpu-b (rank 1:
        gpu-b's NCCL Bootstrap line)"."""
        told = []
        for p in self.suspects:
            if p.get("by"):
                rank = f"rank {p['rank']}: " if p.get("rank") is not None else ""
                told.append(f"{p.get('address') or p['said']} is {p['node']} ({rank}{p['by']})")
        return "; ".join(told)


@dataclass(frozen=True)
class Ties:
    """What the log's own lines tie to a host and rank: addresses (owners) and process ids
    (pid_owners)."""

    addresses: dict[str, Owner] = field(default_factory=dict)
    pids: dict[int, Owner] = field(default_factory=dict)
    gpus: dict[int, list[Owner]] = field(default_factory=dict)  # NCCL's busId -> its processes
    # (host, pid) of an NCCL process -> its rank: the rank of a line NCCL's prefix alone names.
    ranks: dict[tuple[str, int], int] = field(default_factory=dict)
    # The hosts the log names (its lines' prefixes, the nodes its signatures name): a peer's
    # full name is named as the one of them it is (gpu-n03.cluster is gpu-n03).
    hosts: frozenset[str] = frozenset()

    @classmethod
    def of(cls, log: NcclLog, exits: Iterable[Exit] = (), hosts: Iterable[str] = ()) -> Ties:
        ranks = {
            (p.host, p.pid): p.rank
            for p in log.processes.values()
            if p.host and p.pid and p.rank is not None
        }
        return cls(owners(log), pid_owners(log, exits), gpu_owners(log), ranks, frozenset(hosts))

    def gpu(self, pci: str, hosts: set[str]) -> Owner | None:
        """The process on one of ``hosts`` (any host where none is known) that NCCL's comm line
        says uses the GPU at ``pci``; None where no one, or several hosts', do."""
        bus = bus_id(pci)
        found = [o for o in self.gpus.get(bus, []) if not hosts or o.host in hosts] if bus else []
        if len({o.host for o in found}) != 1:
            return None
        ranks = frozenset(r for o in found for r in o.ranks)
        return Owner(found[0].host, ranks, found[0].said)


def teardown(hit: Hit) -> bool:
    """A launcher's word on ranks it saw killed (a restatement naming their nodes) that names
    several nodes at once: the teardown after a time limit, a cancel or a lost node, which says
    nothing of which one failed first (hang/exits.py reads the same reports so): it only
    follows from the failure, and every rank and node it names only waited."""
    sig = hit.signature
    return sig.role == "restatement" and len({v for k, v in hit.named if k == "node"}) > 1


def blame(hit: Hit, ties: Ties) -> Blame:
    """Who the hit's lines name as the cause, through what the log ties to a host and rank. A
    process id no line ties to anyone names no one: the printer stands, as if none were named."""
    sig = hit.signature
    out = Blame()
    printer = (set(hit.hosts), set(hit.ranks))
    if teardown(hit):
        out.reported_nodes = printer[0] | {v for k, v in hit.named if k == "node"}
        out.reported_ranks = printer[1] | {int(v) for k, v in hit.named if k == "rank"}
        return out
    origin = hit.origin
    if origin.rank is None and origin.host and origin.pid:  # NCCL's prefix, and its comm line
        printer[1].update(r for r in [ties.ranks.get((origin.host, origin.pid))] if r is not None)
    named = False
    for kind, value in _most_named(hit) if hit.named else []:
        if kind in ("pid", "gpu"):  # a process or GPU the log ties to a rank, else no one
            owner = ties.pids.get(int(value)) if kind == "pid" else ties.gpu(value, printer[0])
            if owner is not None:
                _owned(owner, out, {"said": f"{kind} {value}"})
                named = True
            continue
        named = True
        if kind == "node":
            if not _local(value):
                out.nodes.add(value)
        elif kind == "rank":
            out.ranks.add(int(value))
        else:
            _peer(value, ties, out)
    if not named and PRINTER in sig.blames:
        out.nodes, out.ranks = printer
        return out
    out.reported_nodes, out.reported_ranks = printer
    return out


def _most_named(hit: Hit) -> list[tuple[str, str]]:
    """What the hit's lines name as the culprit: every name, for a cause or a restatement (each
    line is its own failure: two nodes' tasks killed); for a consequence the peer most of its
    lines name (the ranks that lose the one that died name it first; the ranks a teardown then
    ends are named by the few that lose them next)."""
    if hit.signature.role != "consequence":
        return list(hit.named)
    most = max(hit.named.values())
    return [name for name, times in hit.named.items() if times == most]


def _local(name: str) -> bool:
    """A name or address of the machine it is read on, which names no node of the job."""
    ip = _ip(name)
    if ip is not None:
        return ip.is_loopback or ip.is_unspecified
    return name.lower() in ("localhost", "localhost.localdomain")


def _peer(value: str, ties: Ties, out: Blame) -> None:
    name, held = _name(value), ties.addresses
    address = _address(value)
    if address is None:  # a name: the node it is, by the name the log's other lines give it
        short = name.split(".", 1)[0]
        name = short if short != name and short in ties.hosts else name
        if _HOSTNAME.fullmatch(name) and not _local(name):
            out.nodes.add(name)
            out.suspects.append({"said": value, "node": name})
        return
    if _local(address):
        return
    owner = held.get(address)
    if owner is None:  # named as it is, a suspect, but not a node: no line says whose it is
        out.suspects.append({"said": value, "address": address, "node": None})
        return
    _owned(owner, out, {"said": value, "address": address})


def _owned(owner: Owner, out: Blame, said: dict[str, Any]) -> None:
    """A peer or process the log's lines tie to a host (and a rank, where one process is it)."""
    if owner.host:
        out.nodes.add(owner.host)
    rank = next(iter(owner.ranks)) if len(owner.ranks) == 1 else None
    if rank is not None:
        out.ranks.add(rank)
    out.suspects.append({**said, "node": owner.host, "rank": rank, "by": owner.said})
