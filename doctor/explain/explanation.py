"""What explaining logs found: the signature hits, in the order things happened, and what the
logs said of the job (NCCL's facts, hosts, ranks); the findings and context made of them.
doctor/explain/engine.py fills an Explanation."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from doctor.core.model import Finding, Fix, Severity
from doctor.core.shell import commands
from doctor.explain.catalogue import Signature
from doctor.explain.culprit import Blame, Ties, blame, teardown
from doctor.explain.hit import Hit
from doctor.facts.hang.stacks import StacksFacts
from doctor.facts.nccl.log import NcclLog

if TYPE_CHECKING:
    from doctor.explain.hang.exits import Exit

MAX_NAMES = 64  # hosts/ranks remembered per finding and in the context
T = TypeVar("T", int, str)


def add_names(into: set[T], names: Iterable[T]) -> None:
    """Add to a set of hosts or ranks, which stops growing at MAX_NAMES."""
    for name in sorted(names):
        if name in into or len(into) < MAX_NAMES:
            into.add(name)


def count_names(
    into: dict[tuple[str, str], int], names: Iterable[tuple[tuple[str, str], int]]
) -> None:
    """Add to a hit's named culprits and how often each was named, bounded as add_names is."""
    for name, times in names:
        if name in into or len(into) < MAX_NAMES:
            into[name] = into.get(name, 0) + times


@dataclass
class Explanation:
    """Everything `doctor explain` learnt from its inputs."""

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    hits: dict[str, Hit] = field(default_factory=dict)
    nccl: NcclLog = field(default_factory=NcclLog)
    hosts: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # files that could not be read (fully)
    # Files whose first line no prefix starts while the lines after it are started by one: an
    # excerpt that begins mid-line (looks_cut).
    cut_first: set[str] = field(default_factory=set)
    # A hung job's evidence read from the logs (doctor/explain/hang/written.py): the facts the
    # live look builds, judged by checks/hang.py; and the logs that gave it.
    hang: StacksFacts | None = None
    hang_sources: list[str] = field(default_factory=list)
    # The ranks the launchers saw killed or crash (hang/exits.py), read in the same pass: a
    # process id a line names (the OOM killer's) is that rank.
    exits: list[Exit] = field(default_factory=list)

    def cut_first_line(self, hit: Hit) -> bool:
        """Whether a hit rests on its file's first line alone, and that line looks cut: the
        tail of a line whose missing head may have said it was harmless ("..., trying ipv4")."""
        return hit.on_first_line and hit.count == 1 and hit.source in self.cut_first

    def ordered(self) -> list[Hit]:
        """Hits in the order they happened: by timestamp when every hit has one, else by arrival.
        A fallback reader's hits (a bare exception, unrecognised lines) only where no other
        signature names a cause: beside consequences alone (a Gloo peer lost, a worker failed)
        the exception a rank raised is the cause they follow."""
        hits = [h for h in self.hits.values() if not h.signature.fallback]
        if not hits:
            hits = list(self.hits.values())
        elif all(hit_tier(h) >= CONSEQUENCE for h in hits):
            hits += [
                h for h in self.hits.values() if h.signature.fallback and hit_tier(h) < CONSEQUENCE
            ]
        if hits and all(h.origin.time is not None for h in hits):
            return sorted(hits, key=lambda h: (h.origin.time, h.order))
        return sorted(hits, key=lambda h: h.order)

    def first_error(self) -> Hit | None:
        """The job's first failure: the earliest hit of the surest tier (tier()). A consequence
        stands first only where nothing of a cause's class was seen anywhere in the text; a note
        below a warning (an IB port's SM change) is no failure at all."""
        failed = [h for h in self.ordered() if h.signature.severity >= Severity.WARN]
        return min(failed, key=hit_tier) if failed else None


# A hit's tier as the job's first failure: a cause a program names itself (NCCL's, PyTorch's,
# the kernel's); a restatement of one (NCCL's result codes, a launcher's "Killed"); a cause any
# program may print ("Connection refused") or a long-tail reader names by its class (a generic
# one: an NCCL WARN by its source file, a Python exception); a consequence of a failure
# elsewhere; what is below a warning. The tiers below CONSEQUENCE are a cause's class: a
# consequence never stands first where one of them was seen.
TIERS = 5
CONSEQUENCE = 3


def hit_tier(hit: Hit) -> int:
    """A hit's tier: its signature's, but a launcher's teardown is a consequence."""
    return CONSEQUENCE if teardown(hit) else tier(hit.signature)


def tier(sig: Signature) -> int:
    if sig.severity < Severity.WARN:
        return TIERS - 1
    if sig.role == "consequence":
        return CONSEQUENCE
    if sig.role == "restatement":
        return 1
    return 2 if sig.source == "any" or sig.generic else 0


class _Fields(dict[str, str]):
    """Template fields: a missing group reads as '?' rather than raising."""

    def __missing__(self, key: str) -> str:
        return "?"


def _fields(hit: Hit) -> _Fields:
    g = _Fields(hit.groups)
    # Patterns for several versions of one message use numbered aliases (reason2, ...).
    if "reason" not in g and "reason2" in g:
        g["reason"] = g["reason2"]
    g["peer_text"] = f" (from {g['peer']})" if "peer" in g else ""
    g["node_text"] = f": {g['node']}" if "node" in g else ""
    g["why_text"] = f", due to {g['why'].lower()}" if "why" in g else ""
    g["addr_text"] = f" (remote {g['addr']})" if "addr" in g else ""
    g["dup_text"] = (
        f": rank {g['a']} and rank {g['b']} on CUDA device {g['dev']}"
        if "a" in g and "dev" in g
        else ""
    )
    g["ver_text"] = f" ({g['va']} vs {g['vb']})" if "va" in g else ""
    return g


# What the identity.unique check says to do when machines collide in NCCL's host hash.
IDENTITY_FIX = Fix(
    "Give every machine its own hostname (NCCL's host hash is hostname + boot_id, or "
    "NCCL_HOSTID when set): `doctor preflight --select identity.unique` names the nodes that "
    "collide.",
    commands(
        "sudo hostnamectl set-hostname <unique-name>",
        "doctor preflight -H <nodes> --select identity.unique",
    ),
)


def to_finding(
    hit: Hit,
    first: Hit | None,
    cut: bool = False,
    shared: dict[str, list[str]] | None = None,
    ties: Ties | None = None,
) -> Finding:
    """The Finding for one signature hit: ``nodes`` and ``data.ranks`` name its culprit only
    (culprit.py), those that only printed it are ``data.reported_by``; a restatement or a
    consequence points at the first failure. ``cut``: the hit rests on an excerpt's cut first
    line alone, so it is no more than a warning. ``shared``: hostnames the log shows on several
    machines, the likely cause of a failure that NCCL's host-hash collisions produce (the
    identity.unique check's fix comes first). ``ties``: what the log ties to a host and rank."""
    sig = hit.signature
    ties = ties or Ties()
    blamed = blame(hit, ties)
    summary = sig.summary.format_map(_fields(hit))
    where = hit.origin.label()
    if where:  # a printer that is not the culprit only reported it
        summary += f" [reported by {where}]" if blamed.reported_by() else f" [{where}]"
    if told := blamed.told():
        summary += f"; {told}"
    if cut:
        summary += " (on the excerpt's first line alone, which looks cut: its start is not shown)"
    fix = Fix(sig.fix.text, sig.fix.commands)
    if sig.identity and shared:
        named = "; ".join(f"{h} at {', '.join(a)}" for h, a in shared.items())
        summary += f"; the job's hosts share a hostname ({named}): NCCL takes them for one host"
        if IDENTITY_FIX.commands[0] not in fix.commands:
            fix = Fix(f"{IDENTITY_FIX.text} {fix.text}", IDENTITY_FIX.commands + fix.commands)
    if sig.role != "cause" and first is not None and first is not hit:
        label = culprit_label(blame(first, ties)) or first.origin.label()
        summary += f"; first failure: {first.signature.code}" + (f" on {label}" if label else "")
    data: dict[str, Any] = {
        "count": hit.count,
        "first_seen": f"{hit.source}:{hit.line_no}",
        "meaning": sig.meaning,
        "causes": list(sig.causes),
        "link": sig.link,
        "source": sig.source,
        "role": sig.role,
    }
    if blamed.ranks:  # the findings' contract: "ranks" are causes, "reported_by" only printed it
        data["ranks"] = sorted(blamed.ranks)
    if reporters := blamed.reported_by():
        data["reported_by"] = reporters
    if blamed.suspects:
        data["suspects"] = blamed.suspects
    if hit.origin.time is not None:
        data["time"] = hit.origin.time
    if sig.identity and shared:
        data["shared_hostnames"] = shared
        data["related_check"] = "identity.unique"
    return Finding(
        code=sig.code,
        severity=min(sig.severity, Severity.WARN) if cut else sig.severity,
        summary=summary,
        nodes=tuple(sorted(blamed.nodes)),
        evidence=tuple(f"{source}:{line_no}: {said}" for source, line_no, said in hit.evidence),
        fix=fix,
        data=data,
        check="explain",
    )


def culprit_label(blamed: Blame) -> str:
    """ "rank 640 on nid007306", "gpu-b", "ranks 3, 5": who a finding names, as words."""
    ranks = sorted(blamed.ranks)
    said = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}" if ranks else ""
    nodes = ", ".join(sorted(blamed.nodes))
    return " on ".join(x for x in (said, nodes) if x)


def findings(result: Explanation) -> list[Finding]:
    """Findings, the job's first failure first, then the rest in the order things happened."""
    first = result.first_error()
    shared = result.nccl.shared_hostnames()
    named = {v for h in result.hits.values() for k, v in h.named if k == "node"}
    ties = Ties.of(result.nccl, result.exits, result.hosts | named)
    hits = result.ordered()
    if first is not None:
        hits = [first, *(h for h in hits if h is not first)]
    return [to_finding(h, first, result.cut_first_line(h), shared, ties) for h in hits]


def lead(finding: Finding) -> dict[str, Any]:
    """The job's first failure, for the context: what it is, where it was seen, and its culprit
    (``rank`` and ``host`` where it names one of each; none where it names no one)."""
    ranks = list(finding.data.get("ranks") or [])
    return {
        "code": finding.code,
        "at": finding.data.get("first_seen"),
        "rank": ranks[0] if len(ranks) == 1 else None,
        "host": finding.nodes[0] if len(finding.nodes) == 1 else None,
        "time": finding.data.get("time"),
        "nodes": list(finding.nodes),
        "ranks": ranks,
        "reported_by": finding.data.get("reported_by"),
    }


def context(result: Explanation, first: Finding | None = None) -> dict[str, Any]:
    """What the logs told about the job, whatever failed; ``first``: its first failure (where
    not given, the first of the signatures' findings that is a warning or worse:
    render/explain.py weighs the hang's)."""
    if first is None:
        first = next((f for f in findings(result) if f.severity >= Severity.WARN), None)
    doc: dict[str, Any] = {
        "sources": result.sources,
        "lines": result.lines,
        "hosts": sorted(result.hosts),
        "ranks": sorted(result.ranks),
        "first_error": None if first is None else lead(first),
    }
    if not result.nccl.is_empty():
        doc["nccl"] = result.nccl.to_json()
    if result.errors:
        doc["read_errors"] = result.errors
    return doc
