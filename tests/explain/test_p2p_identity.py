"""P2P and CUDA IPC failures, and their cause when the job's hosts share a hostname (linked to
the identity.unique check and its fix).

Lines are written from the emitters' format strings: NCCL's transport/p2p.cc (tag v2.7.8-1)
WARN("failed to peer with device %d(=%lx): %d %s") and WARN("rank %d failed to get CUDA IPC
handle to device %d(=%lx) : %d %s"); init.cc "Duplicate GPU detected : rank %d and rank %d both
on CUDA device %lx"; bootstrap.cc "Bootstrap : Using%s"; CUDA's cudaGetErrorString texts for
cudaErrorPeerAccessUnsupported (217) and cudaErrorTooManyPeers (711), as PyTorch's
"CUDA error: %s" prints them.
"""

from __future__ import annotations

from doctor.core.model import Finding
from doctor.explain.engine import findings
from tests.explain.fixtures import LOGS, scan, scan_text


def found(text: str) -> list[Finding]:
    return findings(scan_text(text, "job.log"))


def test_cuda_ipc_across_machines_of_one_hostname_names_identity_unique() -> None:
    (ipc, _) = findings(scan(LOGS / "format" / "horovod-p2p-same-hostname.log"))
    assert ipc.code == "nccl.p2p.ipc_failed" and "(invalid argument)" in ipc.summary
    assert "share a hostname (dgx at 10.0.1.5, 10.0.1.6)" in ipc.summary
    assert ipc.data["related_check"] == "identity.unique"
    assert ipc.data["shared_hostnames"] == {"dgx": ["10.0.1.5", "10.0.1.6"]}
    assert "identity.unique" in ipc.fix.text


def test_one_hostname_on_one_machine_is_no_shared_hostname() -> None:
    # Real: two ranks on one VM that NCCL_HOSTID makes two 'nodes'; one address, no collision.
    result = scan(LOGS / "real" / "healthy-nccl-two-hostids.log")
    assert result.nccl.shared_hostnames() == {}


def test_a_duplicate_gpu_on_two_machines_of_one_hostname_puts_the_identity_fix_first() -> None:
    text = (
        "node:11:11 [0] NCCL INFO Bootstrap : Using [0]eth0:10.9.0.1<0>\n"
        "node:12:12 [0] NCCL INFO Bootstrap : Using [0]eth0:10.9.0.2<0>\n"
        "node:12:12 [0] init.cc:521 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both "
        "on CUDA device 1b000\n"
    )
    (dup,) = found(text)
    assert dup.code == "nccl.gpu.duplicate" and dup.data["related_check"] == "identity.unique"
    assert dup.fix.text.startswith("Give every machine its own hostname")
    assert dup.fix.commands[0] == "sudo hostnamectl set-hostname <unique-name>"


def test_different_host_ids_tell_machines_of_one_hostname_apart() -> None:
    text = "".join(
        f"node:{pid}:{pid} [0] NCCL INFO NCCL_HOSTID set by environment to h{pid}\n"
        f"node:{pid}:{pid} [0] NCCL INFO Bootstrap : Using [0]eth0:10.9.0.{pid}<0>\n"
        for pid in (1, 2)
    )
    text += "node:2:2 [0] init.cc:521 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000\n"  # noqa: E501
    (dup,) = found(text)
    assert "related_check" not in dup.data


def test_peer_access_failures() -> None:
    cases = {
        "gpu1:7:7 [0] transport/p2p.cc:201 NCCL WARN failed to peer with device 1(=3d000): 217 "
        "peer access is not supported between these two devices": "nccl.p2p.peer_access_failed",
        "gpu1:7:7 [0] transport/p2p.cc:222 NCCL WARN rank 0 failed to get CUDA IPC handle to "
        "device 1(=3d000) : 201 invalid device context": "nccl.p2p.ipc_failed",
        "RuntimeError: CUDA error: peer access is not supported between these two devices": (
            "cuda.peer_access"
        ),
        "RuntimeError: CUDA error: peer mapping resources exhausted": "cuda.peer_access",
    }
    for line, code in cases.items():
        assert [f.code for f in found(line)] == [code], line
