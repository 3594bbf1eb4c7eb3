"""Show an Explanation: on the terminal, or as JSON in the report's envelope."""

from __future__ import annotations

import datetime as _dt
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from doctor import __version__
from doctor.core.errors import UsageError
from doctor.core.jsonable import SCHEMA_VERSION, jsonable
from doctor.core.model import Finding, Severity
from doctor.core.printable import say
from doctor.explain.engine import Explanation, context, findings
from doctor.explain.explanation import CONSEQUENCE, TIERS, hit_tier
from doctor.explain.source import LogReadError, expand

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from doctor.explain.mapped import Mapped

# rich is imported where text is made: `doctor explain --format json` has no use for it (20 ms
# of a start-up that is a fifth of explaining a 200 MB log).
_STYLE = {Severity.FAIL: "bold red", Severity.WARN: "yellow", Severity.INFO: "cyan"}
NO_SIGNATURE = "no known signature"


def hang_findings(result: Explanation) -> list[Finding]:
    """What the hung job's text says of the hang, judged as the live look is (checks/hang.py)."""
    if result.hang is None:
        return []
    from checks.hang import verdict

    return [replace(f, check="hang") for f in verdict(result.hang)]


def all_findings(result: Explanation) -> tuple[Finding | None, list[Finding]]:
    """The job's first failure (lead()), and every finding, that one first, the rest in their
    order: the hang's verdict (it names the rank behind), then each signature seen, in the order
    things happened. The first failure's consequences are listed under it too (``data.then``)."""
    hung = hang_findings(result)
    signed = findings(result)
    first = lead(result, hung, signed)
    if first is None:
        return None, hung + signed
    rest = [f for f in hung + signed if f is not first]
    then = folded(result, first, signed)
    if then:
        first = replace(first, data={**first.data, "then": [f.code for f in then]})
    return first, [first, *rest]


def lead(result: Explanation, hung: list[Finding], signed: list[Finding]) -> Finding | None:
    """The job's first failure: a cause a program names itself; a restatement of one, or a
    cause any program prints, that names its culprit; else the hang's verdict where it names a
    rank or node (a launcher's "Killed" that says of no rank, torchrun's SIGKILL, yields to the
    rank the hang's evidence names); else the surest signature seen; else the hang's verdict."""
    hit = result.first_error()
    surest = hit_tier(hit) if hit is not None else TIERS
    if surest == 0 or (surest < CONSEQUENCE and (signed[0].nodes or signed[0].data.get("ranks"))):
        return signed[0]
    failed = [f for f in hung if f.severity is Severity.FAIL]
    named = [f for f in failed if f.nodes or f.data.get("ranks")]
    warned = [f for f in signed if f.severity >= Severity.WARN]  # a note is no failure
    chosen = named or warned or failed
    return chosen[0] if chosen else None


def folded(result: Explanation, first: Finding, signed: list[Finding]) -> list[Finding]:
    """The signatures seen that only restate the first failure or follow from it: every one of
    a later tier than it (a consequence lists none: nothing is known to follow from it). Under
    the hang's verdict, the consequences and the restatements that name no one."""
    hit = result.first_error()
    tiers = {h.signature.code: hit_tier(h) for h in result.hits.values()}
    if first.check == "hang":
        return [
            f
            for f in signed
            if tiers.get(f.code) == CONSEQUENCE
            or (0 < tiers.get(f.code, 0) < CONSEQUENCE and not (f.nodes or f.data.get("ranks")))
        ]
    top = TIERS if hit is None else hit_tier(hit)
    return [f for f in signed if f is not first and top < tiers.get(f.code, 0) < TIERS - 1]


def explain_json(result: Explanation) -> dict[str, Any]:
    """The JSON document: the report's envelope with findings and context."""
    first, found = all_findings(result)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "cluster-doctor", "version": __version__},
        "command": "explain",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "findings": [jsonable(f) for f in found],
        "summary": {str(s): sum(1 for f in found if f.severity is s) for s in Severity},
        "context": context(result, first),
    }


def render_explain_json(result: Explanation) -> str:
    return json.dumps(explain_json(result), indent=2) + "\n"


def _finding_lines(index: int, f: Finding) -> list[Text]:
    from rich.text import Text

    head = Text(f"{index:>2}. ")
    head.append(f"{str(f.severity).upper():<4}", style=_STYLE[f.severity])
    head.append(f" {f.summary}")
    if f.check == "hang":  # judged by checks/hang.py: its evidence and fix, no signature
        out = [head, Text(f"      {f.code}", style="dim")]
        out.extend(Text(f"      seen: {e}", style="dim") for e in f.evidence)
        if f.fix is not None:
            out.append(Text(f"      fix: {f.fix.text}", style="green"))
            out.extend(Text(f"        $ {c}", style="green") for c in f.fix.commands)
        return out
    out = [
        head,
        Text(
            f"      {f.code}  (seen {f.data['count']}x, first at {f.data['first_seen']})",
            style="dim",
        ),
    ]
    out.append(Text(f"      why: {f.data['meaning']}"))
    out.extend(Text(f"      cause: {c}", style="dim") for c in f.data["causes"])
    out.extend(Text(f"      seen: {e}", style="dim") for e in f.evidence)
    if f.fix is not None:
        out.append(Text(f"      fix: {f.fix.text}", style="green"))
        out.extend(Text(f"        $ {c}", style="green") for c in f.fix.commands)
    out.append(Text(f"      more: {f.data['link']}", style="dim"))
    return out


def _context_lines(doc: dict[str, Any]) -> list[Text]:
    from rich.text import Text

    out = [Text(f"Read {doc['lines']} lines from {', '.join(doc['sources']) or 'nothing'}.")]
    if doc["hosts"]:
        out.append(Text(f"  hosts: {', '.join(doc['hosts'])}"))
    if doc["ranks"]:
        out.append(Text(f"  ranks: {', '.join(str(r) for r in doc['ranks'])}"))
    nccl = doc.get("nccl")
    if nccl:
        out.extend(nccl_lines(nccl))
    for err in doc.get("read_errors", ()):
        out.append(Text(f"  could not read all of {err}", style="yellow"))
    return out


def nccl_lines(nccl: dict[str, Any]) -> list[Text]:
    """What NCCL said it used: the job in one line, a sentence per node, each rank's detail."""
    from rich.text import Text

    bits = [f"{nccl['library'] or 'NCCL'} {'/'.join(nccl['versions']) or '?'}"]
    if nccl.get("version_printed_by"):
        bits[0] += f" (its version line printed by {', '.join(nccl['version_printed_by'])})"
    if nccl["cuda"]:
        bits.append(f"cuda {nccl['cuda']}")
    if nccl["rocm"]:
        bits.append(f"ROCm {nccl['rocm']}")
    if nccl["nranks"] is not None:
        bits.append(f"{nccl['nranks']} ranks")
    if nccl["nnodes"] is not None:
        bits.append(f"{nccl['nnodes']} nodes")
    if nccl["transports"]:
        bits.append(
            "transports " + ", ".join(f"{t} x{n}" for t, n in sorted(nccl["transports"].items()))
        )
    out = [Text("  " + "; ".join(bits))]
    for host, addresses in (nccl.get("shared_hostnames") or {}).items():
        out.append(Text(f"  {host}: one hostname on several machines ({', '.join(addresses)})"))
    for node in nccl["nodes"]:
        out.append(Text(f"  {node['host']}: {node['summary']}"))
    for p in nccl["processes"]:
        who = f"rank {p['rank']}" if p["rank"] is not None else "rank ?"
        where = f"{p['host'] or '?'}:{p['pid'] or '?'}"
        nets = []
        if p["bootstrap"]:
            nets.append("bootstrap " + " ".join(p["bootstrap"]))
        if p["socket_interfaces"]:
            nets.append("NET/Socket " + " ".join(p["socket_interfaces"]))
        if p["ib_devices"]:
            nets.append("devices " + " ".join(p["ib_devices"]))
        if p["network"]:
            guess = " (inferred)" if p.get("network_from") == "inferred" else ""
            nets.append(f"using {p['network']}{guess}")
        if p["transports"]:
            nets.append("via " + ", ".join(f"{t} x{n}" for t, n in sorted(p["transports"].items())))
        if nets:
            out.append(Text(f"    {who} ({where}): " + "; ".join(nets), style="dim"))
    return out


def _few(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def render_explain_text(result: Explanation, console: Console) -> None:
    from rich.text import Text

    first, found = all_findings(result)
    doc = context(result, first)
    for line in _context_lines(doc):
        console.print(line)
    then = set((first.data.get("then") or []) if first is not None else [])
    hung = [f for f in found if f.check == "hang"]
    signed = [f for f in found if f.check != "hang" and not (f is not first and f.code in then)]
    below = [f for f in found if f.check != "hang" and f is not first and f.code in then]
    index = 1
    for shown, head in (
        (hung, f"The hang, from {_few(result.hang_sources)}"),
        (signed, f"{len(signed) + len(below)} known failure(s), the first failure first, then in "
         "the order they happened"),
    ):  # fmt: skip
        if not shown:
            continue
        if first is not None and first in shown:
            at = f" at {doc['first_error']['at']}" if doc["first_error"]["at"] else ""
            head += f" (first: {first.code}{at})"
        console.print(Text(f"\n{head}:", style="bold"))
        for f in shown:
            for line in _finding_lines(index, f):
                console.print(line)
            if f is first:
                for line in _then_lines(below):
                    console.print(line)
            index += 1
    if not found:
        console.print(Text(f"{NO_SIGNATURE} in these logs.", style="bold"))


def _then_lines(below: list[Finding]) -> list[Text]:
    """What followed from the first failure, a line each: its code, who reported it, its words."""
    from rich.text import Text

    out = []
    for f in below:
        said = f.summary.partition(" [")[0].partition("; first failure")[0]
        by = f.data.get("reported_by") or {}
        who = ", ".join([*(f"rank {r}" for r in by.get("ranks", [])[:4]), *by.get("nodes", [])[:4]])
        named = f" on {', '.join(f.nodes)}" if f.nodes else ""
        reported = f", reported by {who}" if who else ""
        out.append(Text(f"      then: {f.code}{named}{reported}: {said}", style="dim"))
    return out


def show_explanation(
    logs: list[str] | None,
    as_json: bool,
    out: Console | None,
    ahead: dict[str, Mapped] | None = None,
) -> None:
    """`doctor explain`: scan the logs (none: stdin; ``ahead``: those searched already), say on
    stderr what could not be read, and show the result (as JSON, or on ``out``)."""
    from doctor.explain.scan import explain

    if not logs and sys.stdin.isatty():
        raise UsageError("explain: name log files, or pipe a log into 'doctor explain -'")
    try:
        result = explain(expand(logs or ["-"]), ahead=ahead)
    except LogReadError as exc:
        raise UsageError(str(exc)) from None
    for problem in result.errors:
        say(f"{problem} (kept what was read before it)")
    if as_json or out is None:
        sys.stdout.write(render_explain_json(result))
    else:
        render_explain_text(result, out)
