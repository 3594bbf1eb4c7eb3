"""The classes a failure is scored by (bench/explain_score.py): each finding code `doctor explain`
can give, by its longest listed prefix, to the class of failure it names.

A class is what a person fixing the job would call the failure: the cause's area, not the words.
Two codes of one class are the same answer (an IB completion error named by its status or by the
generic NET/IB reader); codes of two classes are different answers. A label (a corpus log's
``class``) is one of CLASSES; the finding codes a label may also give are scored exactly.
"""

from __future__ import annotations

# Every class, with what belongs in it.
CLASSES = {
    "none": "healthy: nothing failed",
    "hang": "ranks waited in a collective (or elsewhere) until a timeout or a person ended them",
    "network.transport": "the data path broke mid-job: IB/RoCE verbs, completions, libfabric "
    "(EFA, CXI), UCX, a NET plugin, NCCL's proxy or its sockets to a peer",
    "network.connect": "a process could not reach another: refused, unreachable, timed out",
    "network.config": "the network a process was told or chose to use is wrong: no interface, "
    "wrong subnet, loopback address, no common interface, no usable NET plugin",
    "gpu.health": "the GPU or its links failed: Xid, ECC, fell off the bus, unknown error, "
    "NVLink, PCIe AER",
    "gpu.kernel": "a GPU kernel faulted: illegal address, device assert, misaligned address, "
    "launch failure of the program's own making",
    "gpu.build": "the program has no code for this GPU: no kernel image, no binary for the GPU",
    "gpu.memory": "the GPU ran out of memory",
    "gpu.driver": "the driver or runtime cannot serve the program: versions, no device, "
    "driver missing or too old",
    "gpu.config": "the ranks' use of the GPUs is wrong: device ordinal, two ranks on one GPU, "
    "peer access, CUDA IPC",
    "host.memory": "a node ran out of memory: the kernel's or the cgroup's OOM killer",
    "host.shm": "shared memory (/dev/shm) full, removed or out of descriptors",
    "host.hardware": "the host's own hardware reported a fault: machine check, PCIe AER",
    "process.crash": "a rank exited, was killed or crashed (signal, segfault) for no reason the "
    "text shows",
    "comm.error": "the communication library refused or broke on its own terms: versions, usage, "
    "sizes that differ between ranks, internal error, topology",
    "launcher": "the job's processes could not be started or joined: ssh, MPI daemons, slots, "
    "rendezvous, the store, a port taken",
    "scheduler.time_limit": "the scheduler ended the job at its time limit",
    "scheduler.node_fail": "the scheduler lost a node of the job",
    "scheduler.cancelled": "the job was cancelled or preempted",
    "container": "the job's container would not start (pyxis, enroot, the runtime)",
    "wrong_results": "a collective's results were wrong (nccl-tests' #wrong, a checked value)",
    "dataloader": "a DataLoader's worker failed or timed out",
    "python.exception": "a rank raised an exception that no more specific reader explains",
    "unrecognised": "error-looking lines no reader knows: the doctor quotes them, names nothing",
}

# Finding code prefix -> class; the longest prefix that a code starts with decides (a prefix
# matches whole dotted parts only: "gpu.xid" takes "gpu.xid.memory", not "gpu.xidx").
BY_PREFIX = {
    "hang": "hang",
    "hang.rank_gone": "process.crash",
    "hang.node_silent": "hang",
    "torch.nccl": "hang",
    "torch.store.wait_timeout": "hang",
    "gloo.op_timeout": "hang",
    "horovod.shut_down": "hang",
    "nccl.ib": "network.transport",
    "nccl.ib.no_ip_interface": "network.config",
    "nccl.ib.no_libibverbs": "network.config",
    "nccl.net": "network.transport",
    "nccl.net.no_plugin": "network.config",
    "nccl.socket": "network.transport",
    "nccl.socket.connect_failed": "network.connect",
    "nccl.socket.wrong_magic": "network.config",
    "nccl.iface": "network.config",
    "nccl.comm_id": "network.config",
    "nccl.result.system_error": "network.transport",
    "nccl.result.remote_error": "network.transport",
    "nccl.result": "comm.error",
    "nccl.result.cuda_error": "gpu.driver",
    "nccl.cuda": "gpu.driver",
    "nccl.shm": "host.shm",
    "nccl.gpu": "gpu.config",
    "nccl.p2p": "gpu.config",
    "nccl.ring": "comm.error",
    "nccl.version": "comm.error",
    "cuda.oom": "gpu.memory",
    "cuda.illegal_address": "gpu.kernel",
    "cuda.device_assert": "gpu.kernel",
    "cuda.error": "gpu.kernel",
    "cuda.ecc": "gpu.health",
    "cuda.no_device": "gpu.driver",
    "cuda.driver_too_old": "gpu.driver",
    "cuda.invalid_device_ordinal": "gpu.config",
    "cuda.peer_access": "gpu.config",
    "gpu.driver_mismatch": "gpu.driver",
    "gpu.xid": "gpu.health",
    "host.oom_killed": "host.memory",
    "torch.store": "launcher",
    "torch.store.connect_timeout": "network.connect",
    "torch.store.unique_id_failed": "network.connect",
    "torch.rendezvous": "launcher",
    "torch.dataloader": "dataloader",
    "torch.dataloader.bus_error": "host.shm",
    "torch.shm": "host.shm",
    "torch.elastic": "process.crash",
    "deepspeed": "process.crash",
    "gloo": "network.connect",
    "gloo.loopback_address": "network.config",
    "gloo.no_address": "network.config",
    "gloo.size_mismatch": "comm.error",
    "gloo.peer_lost": "network.transport",
    "mpi": "launcher",
    "mpi.rank_exited": "process.crash",
    "mpi.rank_killed": "process.crash",
    "slurm.task_killed": "process.crash",
    "ssh": "launcher",
    "ssh.connect_failed": "network.connect",
    "ssh.unresolved": "network.connect",
    "horovod.no_common_interface": "network.config",
    "net": "network.connect",
    "explain.unrecognised": "unrecognised",
    # The long tail's readers (issue 45).
    "nccl.ofi": "network.transport",
    "nccl.warn.ib": "network.transport",
    "nccl.warn.net_plugin": "network.transport",
    "nccl.warn.socket": "network.transport",
    "nccl.warn.proxy": "network.transport",
    "nccl.warn.p2p": "gpu.config",
    "nccl.warn.shm": "host.shm",
    "nccl.warn.cuda": "gpu.driver",
    "nccl.warn.init": "comm.error",
    "nccl.diag.xid": "gpu.health",
    "nccl.attn": "comm.error",
    "cuda.gpu_fault": "gpu.health",
    "cuda.no_kernel_image": "gpu.build",
    "cuda.driver_unusable": "gpu.driver",
    "libfabric": "network.transport",
    "ucx": "network.transport",
    "ucx.caught_signal": "process.crash",
    "mpi.error": "comm.error",
    "slurm.time_limit": "scheduler.time_limit",
    "slurm.node_fail": "scheduler.node_fail",
    "slurm.cancelled": "scheduler.cancelled",
    "slurm.allocation_failed": "launcher",
    "container": "container",
    "nccl_tests": "wrong_results",
    "host.machine_check": "host.hardware",
    "host.pcie_aer": "host.hardware",
    "python": "python.exception",
}


def class_of(code: str | None) -> str:
    """The class a finding code names ("none" for no code; "?" for a code no prefix covers:
    BY_PREFIX must then learn it)."""
    if code is None:
        return "none"
    parts = code.split(".")
    for n in range(len(parts), 0, -1):
        found = BY_PREFIX.get(".".join(parts[:n]))
        if found is not None:
            return found
    return "?"
