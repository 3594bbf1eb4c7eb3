"""amd-smi's and rocm-smi's --json output.

amd-smi (amdsmi_cli/amdsmi_logger.py _print_json_output): the per-GPU dicts of the human format,
lower-case keys, ``{"value": v, "unit": u}`` for measured values, read as the flat records the
human-format reader uses; ``amd-smi topology --json`` adds per-GPU ``links``. rocm-smi
(rocm_smi.py formatJson): ``{"card<N>": {"<name>": "<value>"}, "system": {...}}`` with the
same names as its text lines, the topology as ``"(Topology) Link type between DRM devices 0
and 1"`` keys under ``system``.
"""

from __future__ import annotations

import json
from typing import Any

# One link of `amd-smi topology --json`: (bus id a, bus id b, link type, hops, weight).
JsonLink = tuple[str, str, str, Any, Any]


def document(text: str) -> Any:
    """The JSON value in a pasted segment, junk around it left out; None where there is none."""
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    end = max(text.rfind("]"), text.rfind("}"))
    if not starts or end < min(starts):
        return None
    try:
        return json.loads(text[min(starts) : end + 1])
    except ValueError:
        return None


def gpu_dicts(text: str) -> list[dict[str, Any]]:
    """The per-GPU dicts: a top-level list, or the list a wrapper object holds."""
    doc = document(text)
    candidates = [doc] if isinstance(doc, list) else []
    if isinstance(doc, dict):
        candidates += [v for v in doc.values() if isinstance(v, list)]
        candidates.append([doc])
    for items in candidates:
        found = [i for i in items if isinstance(i, dict) and "gpu" in i]
        if found:
            return found
    return []


def _flat(value: Any, path: str, out: dict[str, str]) -> None:
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "unit"}:
        out.setdefault(path, f"{value['value']} {value.get('unit') or ''}".strip())
    elif isinstance(value, dict):
        for key, sub in value.items():
            _flat(sub, f"{path}.{str(key).upper()}" if path else str(key).upper(), out)
    elif isinstance(value, list):
        out.setdefault(f"{path}#", str(sum(isinstance(v, dict) for v in value)))  # bad pages
    else:
        out.setdefault(path, str(value))


def records(text: str) -> list[dict[str, str]]:
    """{"GPU": "0", "BUS.BDF": ..., "ASIC.MARKET_NAME": ...} per GPU, like tree_records."""
    out = []
    for item in gpu_dicts(text):
        record: dict[str, str] = {}
        _flat(item, "", record)
        out.append(record)
    return out


def links(text: str) -> list[JsonLink]:
    found = []
    for item in gpu_dicts(text):
        listed = item.get("links")
        for link in listed if isinstance(listed, list) else []:
            if isinstance(link, dict) and isinstance(item.get("bdf"), str):
                other = link.get("bdf")
                if isinstance(other, str) and other != item["bdf"]:
                    found.append(
                        (
                            item["bdf"],
                            other,
                            str(link.get("link_type", "?")),
                            link.get("num_hops"),
                            link.get("weight"),
                        )
                    )
    return found


def rocm_smi_cards(text: str) -> dict[str, Any] | None:
    """rocm-smi's JSON document, where the text is one (a card<N> or system key at the top)."""
    doc = document(text)
    if isinstance(doc, dict) and any(k == "system" or k.startswith("card") for k in doc):
        return doc
    return None
