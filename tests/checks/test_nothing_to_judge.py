"""A check with nothing to judge skips with its reason: it never passes having judged nothing.

Every registered check runs on real CPU nodes' facts (no GPU of either vendor, no RDMA device)
and on nodes of which nothing could be read. The checks that pass are listed with what they
judged there: a check that passes without being listed (a new one, or one that lost its skip)
fails the test until it skips or says here what it judged.
"""

from __future__ import annotations

import dataclasses

from doctor.core.model import Status
from doctor.facts.node import NodeFacts
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from tests import factkit as fk

# What each check passing on a CPU node judged there.
JUDGED = {
    "node.reach": "every node answered the probe",
    "shm.size": "the size of /dev/shm",
    "nics.nccl": "the interface NCCL's own rules pick among the node's",
    "nics.mpi": "the interfaces Open MPI's rules pick among the node's",
    "doctor.version": "the cluster-doctor installed on the node against the controller's",
    "nccl.libraries": "the libnccl of the nvidia-nccl-cu12 wheel: loadable, one version",
    "clock.skew": "two clocks",
    "identity.unique": "two hostnames and boot ids",
    "versions.nccl": "two nodes' NCCL versions",
    "versions.software": "two nodes' Python and kernel versions",
    "host.disk": "the free space and inodes of /, /tmp, /dev/shm and $HOME",
    "host.mounts": "/, /tmp, /dev/shm and $HOME answering; /tmp and /dev/shm writable",
    "host.memory": "MemAvailable against MemTotal, and the swap",
    "host.dstate": "the state of every process",
    "host.governor": "each CPU's frequency governor",
    "host.temperature": "the host's hwmon sensors",
    "host.inventory": "two nodes' CPUs and memory",
    "host.load": "two nodes' load per CPU",
    "slurm.node": "the node's state in SLURM",
    "kernel.lockup": "the kernel log in its window: no lockup, stall or hung task",
    "kernel.crash": "the kernel log in its window: no panic or oops",
    "kernel.oom": "the kernel log in its window: no OOM kill",
    "kernel.hardware": "the kernel log in its window: no machine check or memory error",
    "kernel.pcie": "the kernel log in its window: no AER error",
    "kernel.nfs": "the NFS mounts' servers in the kernel log's window",
}


def outcomes(*nodes: NodeFacts) -> dict[str, list[tuple[Status, str]]]:
    found: dict[str, list[tuple[Status, str]]] = {}
    for o in run_checks(load_checks(), fk.cluster(*nodes)):
        found.setdefault(o.check, []).append((o.status, o.reason))
    return found


def passed(*nodes: NodeFacts) -> set[str]:
    found = {c for c, runs in outcomes(*nodes).items() if any(s is Status.PASS for s, _ in runs)}
    assert found <= set(JUDGED), f"passed, judging what? {sorted(found - set(JUDGED))}"
    return found


def second(name: str, capture: str) -> NodeFacts:
    """Another machine with the same software: its own hostname and boot."""
    facts = fk.real(capture, name)
    system = facts.system
    assert not isinstance(system, type(fk.NOT_HERE))
    return dataclasses.replace(facts, system=dataclasses.replace(system, hostname=name))


def test_a_bare_debian_node_passes_only_what_it_judged() -> None:
    # Debian 12 with only python3 and the doctor: no GPU, NCCL, MPI or torch.
    node = fk.real("debian12-bare", "node1")
    assert passed(node) == {"node.reach", "shm.size", "nics.nccl", "nics.mpi", "doctor.version"}
    found = outcomes(node)
    assert found["versions.amd"] == [(Status.SKIP, "one node: nothing to compare across nodes")]
    assert found["nccl.libraries"] == [
        (Status.SKIP, "no libnccl, and no NVIDIA GPU that needs one")
    ]
    assert found["nics.subnet"] == [
        (
            Status.SKIP,
            "fewer than two interfaces with a global IPv4 address: none can share a subnet",
        )
    ]


def test_cpu_nodes_compared_pass_only_what_they_judged() -> None:
    nodes = (fk.real("cpu-torch-wheel", "node1"), second("node2", "cpu-torch-wheel"))
    assert passed(*nodes) == {
        "node.reach",
        "shm.size",
        "nccl.libraries",
        "clock.skew",
        "identity.unique",
        "versions.nccl",
        "versions.software",
    }
    found = outcomes(*nodes)
    for check, reason in {
        "versions.amd": "no node has an AMD GPU (ROCm, amdgpu or GPU firmware)",
        "versions.driver": "no node has an NVIDIA driver",
        "gpu.count": "no node has a GPU",
        "topo.drift": "no node has a GPU or an RDMA NIC",
        "versions.nccl_settings": "no node has an NCCL_* variable or an nccl.conf setting",
    }.items():
        assert found[check] == [(Status.SKIP, reason)], check


def test_nodes_of_which_nothing_was_read_judge_only_that_they_answered() -> None:
    assert passed(fk.node("node1"), fk.node("node2")) == {"node.reach"}


def test_a_hostname_that_resolves_nowhere_is_named() -> None:
    # The clean root has no /etc/hosts: getaddrinfo fails, and the finding names the hostname
    # it read (it printed the Missing object's repr).
    [gloo] = [
        o for o in run_checks(load_checks(), fk.cluster(fk.real("debian12-bare", "node1")))
        if o.check == "nics.gloo"
    ]  # fmt: skip
    assert gloo.findings[0].summary.startswith(
        "GLOO_SOCKET_IFNAME unset; hostname vm does not resolve: Gloo advertises 127.0.0.1"
    )
