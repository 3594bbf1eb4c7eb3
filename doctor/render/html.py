"""The HTML report: one self-contained file drawn from the JSON report document alone.

Inline CSS, inline SVG and one small inline script (the copy buttons); nothing is fetched, so the
file opens offline and can be attached to a ticket. Because it reads only the document,
``--redact`` renders the redacted document and nothing unredacted can slip in. The markup comes
from Jinja2 templates (package data under doctor/render/templates/), autoescaped; Jinja2 is
imported on the first rendering only, so other commands do not pay for it.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from doctor.core.model import CheckOutcome, Status
from doctor.core.nodeset import compact, group_nodes
from doctor.core.printable import printable
from doctor.render.checklist import fold_checks
from doctor.render.figures import as_dict, as_list, counted
from doctor.render.figures.devices import build_devices
from doctor.render.figures.grid import build_grid, mesh_messages, reach_messages
from doctor.render.figures.nic_choice import build_choice
from doctor.render.figures.runs import build_allreduce
from doctor.render.figures.sweep import build_plot
from doctor.render.figures.topology import BOX_H, BOX_W, EDGE_TEXT, build_graphs, cell_kind
from doctor.render.json_report import validate

if TYPE_CHECKING:
    import jinja2

SHOWN_EVIDENCE = 3  # evidence lines shown before the rest fold
SHOWN_NODES = 12  # node names listed before a long list folds
SHOWN_FAILURES = 10  # failed matrix pairs listed before the table folds


@cache
def _environment() -> jinja2.Environment:
    import jinja2
    import markupsafe

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("doctor.render", "templates"),
        autoescape=True,
        # Every value shown as text: no control character in the page (one printed or copied
        # from it would reach a terminal); markup the templates made is left as it is.
        finalize=lambda v: (
            v if isinstance(v, markupsafe.Markup) or not isinstance(v, str) else printable(v)
        ),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["compact"] = compact
    env.globals.update(
        cell_kind=cell_kind,
        BOX_W=BOX_W,
        BOX_H=BOX_H,
        EDGE_TEXT=EDGE_TEXT,
        counted=counted,
        SHOWN_EVIDENCE=SHOWN_EVIDENCE,
        SHOWN_NODES=SHOWN_NODES,
        SHOWN_FAILURES=SHOWN_FAILURES,
    )
    return env


def _outcome(doc: dict[str, Any]) -> CheckOutcome:
    return CheckOutcome(
        doc["check"],
        Status(doc["status"]),
        doc["node"],
        reason=doc["reason"],
        seconds=doc["seconds"],
        title=doc["title"],
    )


def _failures(nodes: dict[str, Any]) -> list[dict[str, str]]:
    """The nodes that could not be probed, with why."""
    out = []
    for name, entry in nodes.items():
        if entry.get("status") == "failed":
            failure = as_dict(entry.get("failure"))
            out.append(
                {
                    "node": name,
                    "code": str(failure.get("code", "")),
                    "summary": str(failure.get("summary", "")),
                    "detail": str(failure.get("detail", "")),
                }
            )
    return out


def _verdict(summary: dict[str, int]) -> str:
    if summary["crash"] or summary["fail"]:
        return "fail"
    return "warn" if summary["warn"] else "pass"


def render_html(document: dict[str, Any]) -> str:
    """The HTML report of a JSON report document (``Report.to_json()``, redacted or not).

    Raises ValueError, with one line saying where, when the document breaks the shipped schema.
    """
    import jsonschema

    try:
        validate(document)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
        raise ValueError(f"not a cluster-doctor report: {where}: {exc.message}") from None
    nodes = document["nodes"]
    rows, skipped = fold_checks(_outcome(o) for o in document["outcomes"])
    mesh, reach = document.get("ssh_mesh"), document.get("reachability")
    graphs, undrawn = build_graphs(nodes)
    findings = document["findings"]
    allreduce = document.get("allreduce")
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            doc=document,
            names=list(nodes),
            baseline=document.get("baseline", {}).get("node", ""),
            failures=_failures(nodes),
            verdict=_verdict(document["summary"]),
            findings=findings,
            rows=rows,
            skipped=skipped,
            many_nodes=len(nodes) > 1,
            mesh=build_grid(mesh, mesh_messages(mesh)),
            reach=build_grid(reach, reach_messages(reach)),
            proven=_proven(reach),
            choice=build_choice(document.get("nics"), findings),
            graphs=graphs,
            undrawn=compact(undrawn),
            devices=build_devices(nodes),
            allreduce=build_allreduce(allreduce),
            plot=build_plot(allreduce, document.get("nics")),
            nccl=[as_dict(row) for row in as_list(document.get("nccl"))],
            stacks=as_dict(document.get("stacks")),
        )
    )


def _proven(reach: Any) -> list[tuple[str, str]]:
    """(interfaces, nodes): which interfaces every peer reached, nodes alike together."""
    proven = {
        node: ", ".join(i for i in as_list(ifaces) if isinstance(i, str)) or "nothing"
        for node, ifaces in as_dict(as_dict(reach).get("proven")).items()
    }
    return sorted((ifaces, compact(nodes)) for ifaces, nodes in group_nodes(proven).items())
