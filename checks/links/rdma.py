"""RDMA links beyond their state: rate and width, the count of ports, error counters and flaps.

A port's rate is judged three ways, and each finding says which: against the node's other ports
of the same HCA model and link layer (relative: one port trained down while its siblings did
not), against the GPU SKU's profile or the run's threshold (absolute: ``rdma.ib_rate_gbps``), and
against what its HCA can do (a note: the switch or cable may be the slower end on purpose).
Counters are judged against rdma-core's error thresholds as counts, and as rates where the
probe read them twice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Severity
from doctor.core.shell import command, commands
from doctor.facts.network.ib_counters import PortCounters
from doctor.facts.network.rdma import Hca, Port, RdmaFacts
from doctor.facts.node import NodeFacts
from doctor.judge.thresholds import limit, need_limit
from doctor.plugin import Skip, need, node_check

# Each lane's generation, slowest first (drivers/infiniband/core/sysfs.c rate_show's names).
GENERATIONS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
# The fastest generation of each NVIDIA (Mellanox) HCA, by PCI device / vendor_part_id
# (hca_type "MT4129"): ConnectX-3 (Pro), Connect-IB, ConnectX-4, -5, -5 Ex, -6, -7, -8,
# BlueField-2, BlueField-3. Ethernet-only parts (ConnectX-4 Lx, -6 Dx, -6 Lx) are not listed.
HCA_BEST = {
    4099: ("ConnectX-3", "FDR"),
    4103: ("ConnectX-3 Pro", "FDR"),
    4113: ("Connect-IB", "FDR"),
    4115: ("ConnectX-4", "EDR"),
    4119: ("ConnectX-5", "EDR"),
    4121: ("ConnectX-5 Ex", "EDR"),
    4123: ("ConnectX-6", "HDR"),
    4129: ("ConnectX-7", "NDR"),
    4131: ("ConnectX-8", "XDR"),
    41686: ("BlueField-2", "HDR"),
    41692: ("BlueField-3", "NDR"),
}
# The IB PortCounters judged as counts (counters/), each with its rdma-core threshold name.
ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "VL15_dropped",
)
# Driver counters (hw_counters/) whose any growth while the probe ran is an error now: a queue
# pair that ran out of RNR or transport retries, a RoCE slow restart (NVSentinel's NIC health).
RISING_HW = (
    "rnr_nak_retry_err",
    "local_ack_timeout_err",
    "roce_slow_restart",
    "req_cqe_error",
    "resp_cqe_error",
    "rx_drops",
)


def _rdma(facts: NodeFacts) -> RdmaFacts:
    rdma = need(facts.rdma, "RDMA")
    if not rdma.present:
        raise Skip("no RDMA devices in /sys/class/infiniband")
    return rdma


def _name(hca: Hca, port: Port) -> str:
    return f"{hca.name} port {port.number}"


def _rate(port: Port) -> str:
    width = f"{port.width}X " if port.width else ""
    return f"{port.rate_gbps:g} Gb/s" + (f" ({width}{port.speed})" if port.speed else "")


def part(hca: Hca) -> int | None:
    m = re.search(r"(\d{4,5})", hca.hca_type or "")
    return int(m.group(1)) if m else None


def _active(rdma: RdmaFacts, layer: str | None = None) -> list[tuple[Hca, Port]]:
    return [
        (h, p)
        for h in rdma.hcas
        for p in h.ports
        if p.active and p.rate_gbps and (layer is None or p.link_layer == layer)
    ]


def _fix(hca: Hca, port: Port) -> Fix:
    return Fix(
        "Reseat or replace the cable or transceiver, and check the switch port; the link "
        "trains again once the port is reset.",
        (
            command("ibstat {} {}", hca.name, port.number),
            command("mlxlink -d {} -p {}", hca.name, port.number),
        ),
    )


@node_check(
    "rdma.link",
    "Every active RDMA port runs at the rate and width it should",
    needs=("rdma",),
    codes={
        "rdma.width.degraded": "an IB port trained at fewer lanes than the node's other ports",
        "rdma.rate.degraded": "an active port is slower than the node's other ports of its model",
        "rdma.rate.below_profile": "an IB port is slower than the GPU profile or threshold says",
        "rdma.rate.below_hca": "an IB port runs below the fastest generation its HCA can do",
    },
)
def link(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    ports = _active(rdma)
    if not ports:
        raise Skip("no active RDMA port shows its rate")
    judged: set[tuple[str, int]] = set()
    groups: dict[tuple[str, str], list[tuple[Hca, Port]]] = {}
    for hca, port in ports:
        groups.setdefault((hca.hca_type or "?", port.link_layer), []).append((hca, port))
    for (model, layer), members in groups.items():
        yield from _relative(model, layer, members, judged)
    yield from _against_profile(facts, rdma, judged)
    notes = []
    for hca, port in _active(rdma, "InfiniBand"):
        best = HCA_BEST.get(part(hca) or 0)
        if (hca.name, port.number) in judged or best is None or port.speed not in GENERATIONS:
            continue
        if GENERATIONS.index(port.speed) < GENERATIONS.index(best[1]):
            notes.append(f"{_name(hca, port)}: {_rate(port)}; a {best[0]} does {best[1]}")
    if notes:
        yield Finding(
            "rdma.rate.below_hca",
            Severity.INFO,
            f"{len(notes)} IB port(s) run below their HCA's fastest generation: the switch or "
            "cable is slower (on purpose, or a wrong cable)",
            evidence=tuple(notes),
            data={"threshold": "absolute", "source": "the HCA model's fastest generation"},
        )


def _relative(
    model: str, layer: str, members: list[tuple[Hca, Port]], judged: set[tuple[str, int]]
) -> Iterator[Finding]:
    """Ports of one model and link layer that trained below the most common rate among them
    (the fastest of the commonest where rates tie: two ports, one at 400 and one at 200 Gb/s,
    is one trained down, for a port never trains above what its link allows)."""
    if len(members) < 2:
        return
    rates = Counter(p.rate_gbps or 0.0 for _, p in members)  # active ports: all have one
    count = max(rates.values())
    common = max(rate for rate, n in rates.items() if n == count)
    kind = f"{model} {layer}" if model != "?" else layer
    widths = Counter(p.width for _, p in members if p.width)
    usual_width = widths.most_common(1)[0][0] if widths else None
    for hca, port in members:
        if not port.rate_gbps or not common or port.rate_gbps >= common:
            continue
        judged.add((hca.name, port.number))
        narrow = layer == "InfiniBand" and usual_width and port.width and port.width < usual_width
        code = "rdma.width.degraded" if narrow else "rdma.rate.degraded"
        what = f"{port.width}X of {usual_width}X" if narrow else _rate(port)
        yield Finding(
            code,
            Severity.WARN,
            f"{_name(hca, port)} runs at {what}, below the {common:g} Gb/s of the node's "
            f"other {kind} ports: NCCL's traffic over it, and the whole ring's, slows to its pace",
            evidence=(
                f"{_name(hca, port)}: {_rate(port)}",
                f"{count} of {len(members)} {kind} ports: {common:g} Gb/s",
                "relative: the node's other ports of the same model",
            ),
            fix=_fix(hca, port),
            data={"threshold": "relative", "rate": port.rate_gbps, "expected": common},
        )


def _against_profile(
    facts: NodeFacts, rdma: RdmaFacts, judged: set[tuple[str, int]]
) -> Iterator[Finding]:
    wanted = limit(facts, "rdma.ib_rate_gbps")
    if wanted is None:
        return
    for hca, port in _active(rdma, "InfiniBand"):
        if (hca.name, port.number) in judged or (port.rate_gbps or 0) >= wanted.value:
            continue
        judged.add((hca.name, port.number))
        yield Finding(
            "rdma.rate.below_profile",
            Severity.WARN,
            f"{_name(hca, port)} runs at {_rate(port)}, below the {wanted.shown} Gb/s this "
            "node's fabric should give",
            evidence=(f"{_name(hca, port)}: {_rate(port)}", str(wanted)),
            fix=_fix(hca, port),
            data={"threshold": "absolute", "rate": port.rate_gbps, "expected": wanted.value},
        )


@node_check(
    "rdma.ports",
    "The node has as many active IB ports at full rate as its GPU profile expects",
    needs=("rdma",),
    codes={"rdma.ports.missing": "fewer active IB ports at full rate than the profile expects"},
)
def port_count(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    expected, rate = limit(facts, "rdma.ib_ports"), limit(facts, "rdma.ib_rate_gbps")
    if expected is None or rate is None:
        raise Skip("no profile of this node's GPUs says how many IB ports it has")
    if facts.capture.raw["probe"].get("source") == "paste":
        raise Skip("a paste may show some of the node's HCAs only: its ports are not counted")
    ib = [(h, p) for h in rdma.hcas for p in h.ports if p.link_layer == "InfiniBand"]
    if not ib:
        raise Skip("no InfiniBand port: the node's fabric is another (RoCE, EFA) or none")
    good = [(h, p) for h, p in ib if p.active and (p.rate_gbps or 0) >= rate.value]
    if len(good) >= expected.value:
        return
    short = [f"{_name(h, p)}: {p.state_text}, {p.rate_gbps or '?'} Gb/s" for h, p in ib]
    yield Finding(
        "rdma.ports.missing",
        Severity.WARN,
        f"{len(good)} active IB port(s) at {rate.shown} Gb/s, {expected.shown} expected: "
        "NCCL spreads the GPUs' traffic over fewer rails",
        evidence=(*short[:16], str(expected), str(rate)),
        fix=Fix(
            "Bring the missing ports up (cable, switch port, subnet manager), or set the "
            "count this node has.",
            commands(
                "ibstat", "doctor.toml: [thresholds.rdma] ib_ports = N  # the count this node has"
            ),
        ),
        data={"threshold": "absolute", "active": len(good), "expected": expected.value},
    )


@node_check(
    "rdma.counters",
    "No RDMA port shows error counters past their thresholds, link flaps or rising errors",
    needs=("rdma",),
    codes={
        "rdma.link.flapping": "a port's link went down and up again (link_downed)",
        "rdma.counters.errors": "a port's error counters are past rdma-core's thresholds",
        "rdma.counters.rising": "a port's error counters grew while the probe ran",
    },
)
def counters(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    seen = [(h, p) for h in rdma.hcas for p in h.ports if p.counters is not None]
    if not seen:
        raise Skip("no port's counters were read")
    for hca, port in seen:
        yield from _port_counters(facts, hca, port)


def _port_counters(facts: NodeFacts, hca: Hca, port: Port) -> Iterator[Finding]:
    counts = port.counters
    assert counts is not None
    name = _name(hca, port)
    clear = Fix(
        "Watch whether the counts grow (they count since the driver loaded or the counters were "
        "cleared); a port whose errors grow needs its cable or transceiver replaced.",
        (command("perfquery -C {} -P {}", hca.name, port.number),),
    )
    flaps = counts.values.get("link_downed")
    flapped_now = counts.increase("link_downed")
    flap_limit = need_limit(facts, "rdma.link_downed")
    if flapped_now or (flaps is not None and flaps > flap_limit.value):
        now = f"; {flapped_now} while the probe ran" if flapped_now else ""
        yield Finding(
            "rdma.link.flapping",
            Severity.WARN,
            f"{name}: the link went down {flaps} time(s){now}: every drop stalls or kills the "
            "job's connections over it",
            evidence=(f"{name}: link_downed {flaps}", str(flap_limit)),
            fix=clear,
            data={"threshold": "absolute", "counter": "link_downed", "value": flaps},
        )
    over = []
    for counter in ERROR_COUNTERS:
        value = counts.values.get(counter)
        threshold = need_limit(facts, f"rdma.{counter}")
        if counter != "link_downed" and value is not None and value > threshold.value:
            over.append(f"{counter} {value} (> {threshold.shown})")
    if over:
        yield Finding(
            "rdma.counters.errors",
            Severity.WARN,
            f"{name}: error counters past their thresholds: {', '.join(over)}",
            evidence=(
                *over,
                f"absolute: rdma-core's error_thresholds ({counts.source})",
            ),
            fix=clear,
            data={"threshold": "absolute", "counters": over},
        )
    yield from _rising(facts, name, counts, clear)


def _rising(facts: NodeFacts, name: str, counts: PortCounters, fix: Fix) -> Iterator[Finding]:
    rising = []
    symbols = counts.rate("symbol_error")
    per_s = need_limit(facts, "rdma.symbol_error_per_s")
    if symbols is not None and symbols > per_s.value:
        rising.append(f"symbol_error {symbols:.1f}/s (> {per_s.shown}/s)")
    recovery = counts.rate("link_error_recovery")
    per_min = need_limit(facts, "rdma.link_error_recovery_per_min")
    if recovery is not None and recovery * 60 > per_min.value:
        rising.append(f"link_error_recovery {recovery * 60:.1f}/min (> {per_min.shown}/min)")
    for counter in RISING_HW:
        grew = counts.increase(f"hw:{counter}")
        if grew:
            rising.append(f"{counter} +{grew}")
    if rising:
        yield Finding(
            "rdma.counters.rising",
            Severity.WARN,
            f"{name}: errors grew while the probe ran: {', '.join(rising)}",
            evidence=(*rising, "absolute: NVSentinel's NIC health rates; any retry exhaustion"),
            fix=fix,
            data={"threshold": "absolute", "rising": rising},
        )


CHECKS = [link, port_count, counters]
