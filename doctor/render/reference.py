"""The check reference (docs/checks.md), generated from the registry so it cannot drift.

Regenerate with ``doctor checks reference > docs/checks.md`` (built-in checks only; see
``REGENERATE``); a test fails while the committed file differs from what this writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from doctor.plugin import CheckSpec

REGENERATE = "CLUSTER_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 doctor checks reference > docs/checks.md"


def render_reference(specs: Iterable[CheckSpec]) -> str:
    """Markdown: every check, and under it every finding code with its meaning and fix."""
    specs = sorted(specs, key=lambda s: s.id)
    lines = [
        "# Check reference",
        "",
        f"<!-- Generated from the check registry. Do not edit; regenerate with: {REGENERATE} -->",
        "",
        "Every check, what it needs, and every finding code it can report with its meaning and "
        "its usual fix. Select or exclude checks by id or dotted prefix with `--select` and "
        "`--exclude`.",
        "",
        "| Check | Scope | What it checks |",
        "|---|---|---|",
    ]
    lines += [f"| [`{s.id}`](#{_anchor(s.id)}) | {s.scope} | {s.title} |" for s in specs]
    lines.append("")
    for s in specs:
        lines += [f"## {s.id}", "", f"{s.title}.", ""]
        lines.append(f"- scope: {'one node at a time' if s.scope == 'node' else 'cluster-wide'}")
        if s.needs:
            lines.append(f"- needs facts: {', '.join(s.needs)}")
        lines.append("")
        for code in sorted(s.codes):
            meaning = s.codes[code]
            lines += [f"### `{code}`", "", meaning[:1].upper() + meaning[1:] + ".", ""]
            fix = s.fixes.get(code)
            if fix is None:
                lines += ["Fix: given with the finding (it depends on what was seen).", ""]
                continue
            lines += [f"Fix: {fix.text}", ""]
            if fix.commands:
                lines += ["```sh", *fix.commands, "```", ""]
    lines += _thresholds()
    return "\n".join(lines).rstrip("\n") + "\n"


def _thresholds() -> list[str]:
    """The shipped thresholds and GPU profiles (doctor/judge/profiles.json), each with its
    source: what a finding calls "absolute" unless the run set its own (--threshold)."""
    from doctor.judge.profiles import SKU_KEYS, defaults, profiles

    lines = [
        "## Thresholds",
        "",
        "The values the checks judge against unless the run sets its own with "
        '`--threshold NAME=VALUE` (or `threshold = ["NAME=VALUE"]` in doctor.toml). A finding '
        "says whether it judged against one of these (absolute) or against the node's or the "
        "cluster's other devices (relative).",
        "",
        "| Name | Default | Source |",
        "|---|---|---|",
        *(f"| `{t.name}` | {t.shown} | {t.source} |" for t in defaults().values()),
        "",
        "Per GPU model (matched on the product name every GPU of the node has), set with "
        "`allreduce.busbw_gbps` (the node's own allreduce, `--gpu-tests`), `rdma.ib_rate_gbps`, "
        "`rdma.ib_ports`, `gpu.h2d_gbps` and `gpu.p2p_gbps`; the multi-node allreduce's floor "
        "(`allreduce.multinode_busbw_gbps`) has no default: it is set where the fabric is known.",
        "",
        "| Profile | Matches | busbw GB/s | IB Gb/s | IB ports | H2D GB/s | P2P GB/s | Source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in profiles():
        cells = [f"{p.values[k]:g}" if k in p.values else "-" for k in SKU_KEYS]
        lines.append(f"| {p.name} | {', '.join(p.match)} | {' | '.join(cells)} | {p.source} |")
    return [*lines, ""]


def _anchor(check_id: str) -> str:
    """The anchor GitHub gives a ``## <id>`` heading: lower case, dots and symbols dropped."""
    return "".join(c for c in check_id.lower() if c.isalnum() or c in "-_")


def check_list_text(specs: Iterable[CheckSpec]) -> str:
    """`doctor checks list`: one line per check."""
    lines = []
    for s in specs:
        needs = f"  needs: {', '.join(s.needs)}" if s.needs else ""
        lines.append(f"{s.id:<28} {s.scope:<7} {s.title}{needs}\n")
    return "".join(lines)


def check_list_json(specs: Iterable[CheckSpec]) -> str:
    rows = [
        {
            "id": s.id,
            "title": s.title,
            "scope": s.scope,
            "needs": list(s.needs),
            "codes": dict(s.codes),
        }
        for s in specs
    ]
    return json.dumps(rows, indent=2) + "\n"
