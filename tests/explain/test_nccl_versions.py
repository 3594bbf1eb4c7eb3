"""The NCCL log reader on every version range's shapes (tests/fixtures/logs/nccl: written from each
version's format strings, as their headers say), read the way `doctor explain` reads a log."""

from __future__ import annotations

from typing import Any

import pytest

from tests.explain.fixtures import LOGS, scan

# fixture: version, network, HCAs used, link layers, bootstrap, GDR, nranks, nnodes
EXPECTED: dict[str, tuple[Any, ...]] = {
    "v2.4-ib-mpirun.log": ("2.4.8", "IB", ["mlx4_0"], ["IB"], ["ib0"], False, 2, 2),
    "v2.7-socket-torchrun.log": ("2.7.8", "Socket", [], [], ["eth0"], None, 4, 2),
    "v2.12-ib-gdr-srun.log": ("2.12.12", "IB", ["mlx5_0", "mlx5_1"], ["IB"], ["ib0"], True, 4, 2),
    "v2.18-roce-k8s-hpcx.log": (
        "2.18.3", "IBext", ["mlx5_2", "mlx5_3"], ["RoCE"], ["eth0"], True, 2, 2,
    ),
    "v2.21-efa-ofi.log": ("2.21.5", "AWS Libfabric", [], [], ["ens32"], True, 16, 2),
    "v2.27-socket-fallback.log": ("2.27.3", "Socket", [], [], ["bond0"], None, 2, 2),
    "rccl-roce.log": ("2.20.5", "IB", ["rdma0", "rdma1"], ["RoCE"], ["eth0"], True, 16, 2),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_what_nccl_said_it_used(name: str) -> None:
    doc = scan(LOGS / "nccl" / name).nccl.to_json()
    got = (
        doc["version"], doc["network"], doc["hcas"], doc["link_layers"], doc["bootstrap"],
        doc["gdr"], doc["nranks"], doc["nnodes"],
    )  # fmt: skip
    assert got == EXPECTED[name]


def test_old_shapes_a_bare_banner_and_ring_lines() -> None:
    log = scan(LOGS / "nccl" / "v2.4-ib-mpirun.log").nccl
    assert (log.version, log.cuda) == ("2.4.8", "10.0")
    by_rank = {p.rank: p for p in log.processes.values()}
    assert by_rank[0].host == "gpu01" and by_rank[1].host == "gpu02"
    assert by_rank[0].transports() == {"NET/IB": 2}
    assert by_rank[0].gdr_hcas == {"mlx4_0": "disabled (no module or not supported by GPU)"}
    assert by_rank[0].plugin.status() == "none" and by_rank[0].init_complete


def test_plugins_in_their_shapes() -> None:
    hpcx = scan(LOGS / "nccl" / "v2.18-roce-k8s-hpcx.log").nccl
    (worker0,) = [p for p in hpcx.processes.values() if p.host == "train-worker-0"]
    assert worker0.plugin.status() == "loaded" and worker0.plugin.name == "IBext"
    assert worker0.plugin.path == "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"
    assert worker0.env == {"NCCL_IB_GID_INDEX": "3"} and worker0.ib_oob == "net1:192.168.200.11<0>"
    efa = scan(LOGS / "nccl" / "v2.21-efa-ofi.log").nccl
    rank0 = next(p for p in efa.processes.values() if p.rank == 0)
    assert rank0.plugin.to_json() | {"errors": []} == {
        "status": "loaded", "name": "AWS Libfabric", "api": "v8",
        "version": "aws-ofi-nccl 1.9.1-aws", "path": None, "errors": [],
        "provider": "efa", "nics": 4,
    }  # fmt: skip
    assert (rank0.nnodes, rank0.local_ranks, rank0.bus_id) == (2, 8, "101c0")
    drift = scan(LOGS / "nccl" / "v2.21-v2.18-drift.log").nccl
    b = next(p for p in drift.processes.values() if p.host == "gpu-b")
    assert b.plugin.status() == "none" and b.version == "2.18.5"
    assert dict(drift.versions) == {"2.21.5": 1, "2.18.5": 1}


def test_rccl_banner() -> None:
    log = scan(LOGS / "nccl" / "rccl-roce.log").nccl
    assert (log.library, log.version, log.hip) == ("RCCL", "2.20.5", "6.2.41133-dd7f95766")
    assert log.rocm == "6.2.0.0-66-8fd0e14"
    assert log.library_path == "/opt/rocm-6.2.0/lib/librccl.so.1"


def test_diagnostics_lines() -> None:
    (proc,) = scan(LOGS / "nccl" / "v2.31-diagnostics.log").nccl.processes.values()
    statuses = [s for s, _ in proc.diagnostics]
    assert statuses == ["", "OK", "WARN", "INFO", ""]
    assert proc.diagnostics[2][1].startswith("net bw: 181.2/362.4/363.0 Gbit/s")


def test_sentence_per_node() -> None:
    doc = scan(LOGS / "nccl" / "v2.12-ib-gdr-srun.log").nccl.to_json()
    assert [n["summary"] for n in doc["nodes"]] == [
        "NCCL 2.12.12 used NET/IB mlx5_[0-1] (IB) with GDR, bootstrap ib0; P2P/IPC inside the node",
        "NCCL 2.12.12 used NET/IB mlx5_[0-1] (IB) with GDR, bootstrap ib0; P2P/IPC inside the node",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via",
        "NCCL INFO NET/IB : Using [x]mlx5_0:1/IB ; OOB",
        "NCCL INFO comm 0x1 rank 99999999999999999999 nranks 1",
        "\x00NCCL INFO Bootstrap : Using [0]:<0>",
        "NCCL version 2.",
        "NCCL INFO NET/Plugin: Loaded net plugin",
        "host:1:2 [0] NCCL DIAG",
        "NCCL INFO Using network " + "x" * 5000,
    ],
)
def test_junk_is_kept_out_never_a_crash(line: str) -> None:
    from doctor.facts.nccl.log import parse_nccl_log

    parse_nccl_log([line, line[::-1]]).to_json()
