"""Each node's RDMA ports and GPUs as table rows: rate, width and error counters of every HCA
port; temperature, margin to slowdown, power cap and firmware of every GPU.

Rows read the nodes' facts in the JSON report document (``rdma`` and ``gpus``), defensively: a
fact of another shape gives no row. Nodes whose rows are alike share one row that names them all,
so 128 identical nodes are one line per port, not 128.
"""

from __future__ import annotations

from typing import Any

from doctor.core.nodeset import compact
from doctor.render.figures import as_dict, as_list, as_number, as_text

MAX_ROWS = 64  # distinct rows shown; a fleet that differs more is summarised by its findings


def _counters(port: dict[str, Any]) -> str:
    """The error counters that are not zero (data and packet counts are traffic, not errors)."""
    values = as_dict(as_dict(port.get("counters")).get("values"))
    shown = [
        f"{name} {int(value)}"
        for name, value in sorted(values.items())
        if isinstance(name, str)
        and not name.startswith(("port_xmit_data", "port_rcv_data", "hw:"))
        and name not in ("port_xmit_wait", "port_xmit_packets", "port_rcv_packets")
        and (as_number(value) or 0) > 0
    ]
    return ", ".join(shown[:6]) or ("none" if values else "-")


def _port_row(hca: dict[str, Any], port: dict[str, Any]) -> tuple[str, ...]:
    rate = as_number(port.get("rate_gbps"))
    width = as_number(port.get("width"))
    lanes = f"{int(width)}X {as_text(port.get('speed'))}".strip() if width else ""
    number = as_number(port.get("number"))
    return (
        as_text(hca.get("name")) + (f" port {number:g}" if number is not None else ""),
        as_text(hca.get("hca_type")) or "-",
        as_text(port.get("state_text")) or "?",
        as_text(port.get("link_layer")) or "?",
        (f"{rate:g} Gb/s" if rate else "-") + (f" ({lanes})" if lanes else ""),
        _counters(port),
        as_text(hca.get("fw_ver")) or "-",
    )


def _gpu_row(gpu: dict[str, Any]) -> tuple[str, ...]:
    health = as_dict(gpu.get("health"))

    def number(key: str, unit: str) -> str:
        value = as_number(health.get(key))
        return f"{value:g} {unit}" if value is not None else "-"

    power = number("power_limit", "W")
    default = as_number(health.get("power_default"))
    index = as_number(gpu.get("index"))
    return (
        ("GPU?" if index is None else f"GPU{index:g}") + f" {as_text(gpu.get('name'))}",
        number("temperature", "°C"),
        number("slowdown_margin", "°C"),
        power + (f" of {default:g} W" if default is not None and power != "-" else ""),
        as_text(health.get("vbios")) or "-",
        as_text(health.get("firmware")) or "-",
    )


def build_devices(nodes: dict[str, Any]) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """{"ports": [(nodes, row)], "gpus": [(nodes, row)]}: rows alike across nodes once."""
    ports: dict[str, list[tuple[str, ...]]] = {}
    gpus: dict[str, list[tuple[str, ...]]] = {}
    for name, entry in as_dict(nodes).items():
        facts = as_dict(as_dict(entry).get("facts"))
        for hca in as_list(as_dict(facts.get("rdma")).get("hcas")):
            for port in as_list(as_dict(hca).get("ports")):
                ports.setdefault(name, []).append(_port_row(as_dict(hca), as_dict(port)))
        for gpu in as_list(as_dict(facts.get("gpus")).get("gpus")):
            gpus.setdefault(name, []).append(_gpu_row(as_dict(gpu)))
    return {"ports": _fold(ports), "gpus": _fold(gpus)}


def _fold(rows: dict[str, list[tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    """Each distinct row with the nodes that have it, in the order first seen."""
    having: dict[tuple[str, ...], list[str]] = {}
    for node, node_rows in rows.items():
        for row in node_rows:
            having.setdefault(row, []).append(node)
    return [(compact(nodes), row) for row, nodes in list(having.items())[:MAX_ROWS]]
