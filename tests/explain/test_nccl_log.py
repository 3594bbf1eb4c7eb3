"""NCCL_DEBUG=INFO context: version, ranks, interfaces, transports per channel."""

from __future__ import annotations

from doctor.facts.nccl.lines import transport_name
from doctor.facts.nccl.log import parse_nccl_log
from tests.explain.fixtures import LOGS, body


def lines(name: str) -> list[str]:
    return body(LOGS / name).decode().splitlines()


def test_real_bootstrap_choice_in_a_namespace() -> None:
    log = parse_nccl_log(lines("real/nccl-bootstrap-netns.log"))
    (proc,) = log.processes.values()
    assert proc.bootstrap == [("eth0", "198.18.5.1")]
    assert log.version is None  # ncclGetUniqueId alone prints no banner


def test_real_env_lines() -> None:
    log = parse_nccl_log(lines("real/nccl-no-iface.log"))
    assert any(p.env.get("NCCL_SOCKET_IFNAME") == "nosuchif0" for p in log.processes.values())


def test_two_node_context_from_the_format() -> None:
    log = parse_nccl_log(lines("format/nccl-context-gpu.log"))
    assert (log.version, log.cuda, log.cuda_driver, log.nnodes()) == ("2.32.3", "12.9", 12090, 2)
    by_rank = {p.rank: p for p in log.processes.values()}
    assert sorted(by_rank) == [0, 1, 2]
    rank0 = by_rank[0]
    assert rank0.network == "Socket" and rank0.nranks == 4 and rank0.local_ranks == 2
    assert rank0.socket_ifs[1][0] == "veth1a2b3c"
    assert rank0.socket_ifs[1][1].startswith("fe80::")
    assert rank0.transports() == {"P2P/CUMEM": 2, "NET/Socket": 1}
    assert by_rank[2].transports() == {"P2P/CUMEM": 1, "NET/IB/GDRDMA": 1}
    assert by_rank[2].init_complete
    assert log.transports()["NET/Socket"] == 2


def test_transport_names() -> None:
    assert transport_name("NET/IB/2(3)/GDRDMA") == "NET/IB/GDRDMA"
    assert transport_name("NET/Socket/0") == "NET/Socket"
    assert transport_name("P2P/IPC/read") == "P2P/IPC"
    assert transport_name("SHM/direct/direct") == "SHM"
    assert transport_name("direct shared memory") == "SHM"
