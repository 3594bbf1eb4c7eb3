"""The check reference (docs/checks.md), generated from the registry so it cannot drift.

Regenerate with ``doctor checks reference > docs/checks.md`` (built-in checks only; see
``REGENERATE``); a test fails while the committed file differs from what this writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from doctor.judge.threshold_table import SKUS, THRESHOLDS
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
    lines += _thresholds()
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
    """The shipped thresholds (doctor/judge/thresholds.py): default, kind and source of each."""
    lines = [
        "## Thresholds",
        "",
        "The numbers checks judge by. An absolute threshold holds each node to a limit; a "
        "relative one to how far it may stray from the other nodes. Override any in doctor.toml "
        '(`[thresholds.host]` then `disk_free_pct = 10`, or `"host.disk_free_pct" = 10` under '
        "`[thresholds]`); a finding names the threshold it crossed and where its value came "
        "from.",
        "",
        "| Threshold | Default | Kind | Meaning | Source of the default |",
        "|---|---|---|---|---|",
    ]
    for t in THRESHOLDS:
        default = "none" if t.default is None else f"{t.default:g} {t.unit}".strip()
        if t.profiles:
            default += " (" + ", ".join(f"{p}: {v:g}" for p, v in t.profiles.items()) + ")"
        lines.append(f"| `{t.name}` | {default} | {t.kind} | {t.meaning} | {t.source} |")
    lines += [
        "",
        "A row of values per GPU model takes the model's value where its GPUs match (every NVIDIA "
        "GPU of the node holds one of the names):",
        "",
        "| GPU model | Matches | Source |",
        "|---|---|---|",
        *(f"| {k.name} | {', '.join(k.match)} | {k.source} |" for k in SKUS),
    ]
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
