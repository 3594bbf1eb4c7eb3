"""TCP reachability on candidate interfaces, judged the way Horovod's interface test does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.core.jsonable import loads
from doctor.facts.coverage import Coverage

OK = "ok"
# A pair whose worst status is one of these failed (tested again after the stage); the others
# connected (a NAT path) or say nothing about the pair.
FAILED = ("timeout", "unreachable", "refused", "failed", "wrong_host")
# When several interfaces of a peer fail, the node×node matrix shows the first of these.
_WORST_FIRST = (
    "timeout",
    "unreachable",
    "refused",
    "failed",
    "wrong_source",
    "wrong_host",
    "not_tested",
)


@dataclass(frozen=True)
class ReachLink:
    """``source`` connecting to ``target``'s ``iface`` address; ``seen_from`` is the address the
    connection arrived from on the receiving side (NAT and docker paths change it)."""

    source: str
    target: str
    iface: str
    address: str
    status: str
    seen_from: str | None = None
    message: str = ""


@dataclass(frozen=True)
class Reachability:
    nodes: tuple[str, ...]
    interfaces: dict[str, dict[str, str]]  # node -> iface -> address tested
    links: tuple[ReachLink, ...]
    port: int
    not_run: dict[str, str] = field(default_factory=dict)
    coverage: Coverage | None = None  # which pairs were tested (None: all)
    protocol: str = ""  # how no connect was judged before its target listened
    retried: tuple[ReachLink, ...] = ()  # the failed pairs' second attempts, after the stage

    def tried(self, source: str, target: str) -> list[ReachLink]:
        """The attempts that judge the pair: the second ones where it was tested again."""
        again = [x for x in self.retried if x.source == source and x.target == target]
        return again or [x for x in self.links if x.source == source and x.target == target]

    def first_tried(self, source: str, target: str) -> list[ReachLink]:
        return [x for x in self.links if x.source == source and x.target == target]

    def final(self) -> list[ReachLink]:
        """Every judged link: the second attempt in place of the first where there was one."""
        again = {(x.source, x.target) for x in self.retried}
        return [x for x in self.links if (x.source, x.target) not in again] + list(self.retried)

    def pair_status(self, source: str, target: str) -> str | None:
        statuses = [x.status for x in self.tried(source, target)]
        if not statuses:
            return None
        if OK in statuses:
            return OK
        return next((s for s in _WORST_FIRST if s in statuses), statuses[0])

    def proven(self) -> dict[str, set[str]]:
        """Per tested node, the interfaces every tested peer reached: what a recommendation may
        use. A node nobody could test (its agent did not run) is left out, not given an empty
        set: nothing was proven about it either way."""
        out: dict[str, set[str]] = {}
        final = self.final()
        for node, ifaces in self.interfaces.items():
            judged = [x for x in final if x.target == node and x.status != "not_tested"]
            if not judged:
                continue
            out[node] = {
                iface
                for iface in ifaces
                if (links := [x for x in judged if x.iface == iface])
                and all(x.status == OK for x in links)
            }
        return out

    def to_section(self) -> dict[str, Any]:
        matrix: dict[str, dict[str, str]] = {}
        for s in self.nodes:
            row = {t: st for t in self.nodes if t != s and (st := self.pair_status(s, t))}
            if row or s not in self.not_run:
                matrix[s] = row
        return {
            "nodes": list(self.nodes),
            "port": self.port,
            "interfaces": self.interfaces,
            "matrix": matrix,
            "links": [_link_json(x) for x in self.links],
            "retried": [_link_json(x) for x in self.retried],
            "proven": {n: sorted(v) for n, v in self.proven().items()},
            "not_run": dict(self.not_run),
            "coverage": self.coverage.to_json() if self.coverage else None,
            "protocol": self.protocol,
        }


def _link_json(x: ReachLink) -> dict[str, Any]:
    return {
        "source": x.source,
        "target": x.target,
        "iface": x.iface,
        "address": x.address,
        "status": x.status,
        "seen_from": x.seen_from,
        "message": x.message,
    }


def done_event(text: str) -> dict[str, Any] | None:
    """The agent's final line (``{"ev": "done", ...}``) from its output, if it got that far."""
    for line in reversed(text.splitlines()):
        try:
            doc = loads(line)
        except ValueError:
            continue
        if (
            isinstance(doc, dict)
            and doc.get("ev") == "done"
            and isinstance(doc.get("connects"), list)
        ):
            return doc
    return None


def judge(
    outputs: dict[str, dict[str, Any]], interfaces: dict[str, dict[str, str]]
) -> list[ReachLink]:
    """Every connect attempt, confirmed against what the receiving listeners saw."""
    arrived: dict[tuple[str, str, str], tuple[str, str]] = {}  # token -> (receiver, peer addr)
    for receiver, doc in outputs.items():
        for entry in doc.get("accepted", []):
            parts = str(entry.get("token", "")).split()
            if len(parts) == 3:
                arrived[(parts[0], parts[1], parts[2])] = (receiver, str(entry.get("peer")))
    links = []
    for source, doc in outputs.items():
        for c in doc["connects"]:
            target, iface, address = str(c["node"]), str(c["iface"]), str(c["address"])
            status, seen, message = str(c.get("status", "failed")), None, str(c.get("error", ""))
            listening = outputs.get(target, {}).get("listen", {}).get(address)
            if listening not in (None, OK):
                status, message = "not_tested", f"{target} could not listen there: {listening}"
            elif status == OK:
                got = arrived.get((source, target, address))
                if got is None:
                    status = "not_tested" if target not in outputs else "wrong_host"
                    message = "the connection never arrived at " + target
                else:
                    receiver, seen = got
                    if receiver != target:
                        status = "wrong_host"
                        message = f"answered by {receiver}: the address is also {receiver}'s"
                    elif seen != c.get("local"):
                        status = "wrong_source"
                        message = f"sent from {c.get('local')}, arrived from {seen} (NAT)"
            elif target not in outputs:  # nobody listened there: a failure says nothing
                status, message = "not_tested", f"the reachability agent did not run on {target}"
            links.append(ReachLink(source, target, iface, address, status, seen, message))
    return links
