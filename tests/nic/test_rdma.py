"""RDMA facts and checks on a hand-written HCA capture (see tests/nic/ib_capture.py)."""

from __future__ import annotations

import dataclasses

from checks.nics import nccl_iface
from checks.rdma import memlock, rdma_state
from doctor.core.capture import Capture
from doctor.facts.limits import Rlimit
from doctor.facts.network.rdma import parse_rate, parse_rdma, parse_state
from doctor.nic.config import Setting
from doctor.nic.nccl import ib_choice
from doctor.nic.plan import with_plan
from doctor.plugin import Skip
from tests import factkit
from tests.factkit import live as node
from tests.nic.ib_capture import ib_raw


def codes(findings) -> set[str]:
    return {f.code for f in findings}


def test_parse_ib_capture() -> None:
    rdma = parse_rdma(Capture(ib_raw()))
    assert [h.name for h in rdma.hcas] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    ib, roce, down = (h.ports[0] for h in rdma.hcas)
    assert (ib.active, ib.transport, ib.rate_gbps) == (True, "IB", 200.0)
    assert roce.transport == "RoCE" and roce.netdevs == ("ens1f1np1",)
    assert [g.type for g in roce.gids] == ["IB/RoCE v1", "RoCE v2"]  # the empty slot is dropped
    assert (down.active, down.phys_state) == (False, "Polling")
    assert rdma.hcas[1].pci_address == "0000:3b:00.1"
    assert rdma.uverbs and rdma.verbs_loadable is True


def test_sysfs_formats() -> None:
    assert parse_state("4: ACTIVE") == (4, "ACTIVE")
    assert parse_state("garbage") == (None, "garbage")
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0 and parse_rate("") is None


def test_ib_hca_selection_with_ports() -> None:
    rdma = parse_rdma(Capture(ib_raw()))
    every = ib_choice(rdma, {})
    assert every.usable and [p.hca for p in every.ports] == ["mlx5_0", "mlx5_1"]
    one = ib_choice(rdma, {"NCCL_IB_HCA": Setting("=mlx5_1:1", "env")})
    assert [p.hca for p in one.ports] == ["mlx5_1"]
    wrong_port = ib_choice(rdma, {"NCCL_IB_HCA": Setting("=mlx5_0:2", "env")})
    assert not wrong_port.usable and "selects no ACTIVE port" in wrong_port.reason
    assert not ib_choice(rdma, {"NCCL_IB_DISABLE": Setting("1", "env")}).usable


def test_rdma_findings() -> None:
    facts = node("n1", rdma=parse_rdma(Capture(ib_raw(uverbs=False))))
    found = codes(rdma_state.fn(facts))
    assert {"rdma.no_active_port", "rdma.roce_no_v2", "rdma.no_uverbs"} <= found
    assert "rdma.no_uverbs" not in codes(
        rdma_state.fn(node("n1", rdma=parse_rdma(Capture(ib_raw()))))
    )


def test_memlock_limited_with_rdma_fails() -> None:
    facts = node("n1", rdma=parse_rdma(Capture(ib_raw())))
    limits = dataclasses.replace(facts.limits, memlock=Rlimit(8 << 20, 8 << 20))
    assert codes(memlock.fn(dataclasses.replace(facts, limits=limits))) == {"limits.memlock"}
    unlimited = dataclasses.replace(facts.limits, memlock=Rlimit(-1, -1))
    assert not list(memlock.fn(dataclasses.replace(facts, limits=unlimited)))


def test_memlock_skips_without_rdma() -> None:
    facts = node("n1")  # this machine: no /sys/class/infiniband
    try:
        list(memlock.fn(facts))
    except Skip as skip:
        assert "no RDMA devices" in skip.reason
    else:
        raise AssertionError("expected a skip")


def test_ib_hca_that_selects_nothing() -> None:
    facts = node("n1", rdma=parse_rdma(Capture(ib_raw())))
    assert "nccl.ib.no_match" not in {f.code for f in nccl_iface.fn(facts)}
    wrong = with_plan(dataclasses.replace(facts, env={**facts.env, "NCCL_IB_HCA": "=mlx5_9"}))
    found = [f for f in nccl_iface.fn(wrong) if f.code == "nccl.ib.no_match"]
    assert len(found) == 1 and str(found[0].severity) == "warn"
    forced = with_plan(dataclasses.replace(wrong, env={**wrong.env, "NCCL_NET": "IB"}))
    assert [str(f.severity) for f in nccl_iface.fn(forced) if f.code == "nccl.ib.no_match"] == [
        "fail"
    ]


def test_no_gdr_unless_dma_buf_can_stand_in() -> None:
    # No nvidia_peermem with an NVIDIA GPU: warned, except where the open kernel module on Linux
    # 5.12+ gives NCCL the DMA-BUF path.
    rdma = dataclasses.replace(parse_rdma(Capture(ib_raw())), gdr_module=None)
    base = {"rdma": rdma, "pci": [factkit.gpu()]}

    def found(module: str, kernel: str) -> set[str]:
        drv = dataclasses.replace(factkit.driver(), kernel_module=module)
        return codes(
            rdma_state.fn(
                factkit.node("n1", driver=drv, system=factkit.system(kernel=kernel), **base)
            )
        )

    assert "rdma.no_gdr" in found("proprietary", "6.8.0-45-generic")
    assert "rdma.no_gdr" in found("open", "5.4.0-150-generic")
    assert "rdma.no_gdr" not in found("open", "5.15.0-105-generic")
