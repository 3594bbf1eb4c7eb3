"""The rows of the thresholds table (doctor/judge/thresholds.py reads them): every number a check
judges against, its unit, kind, meaning and the source of its default; and the GPU models whose
own values some rows hold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["absolute", "relative"]


@dataclass(frozen=True)
class Threshold:
    name: str  # "host.disk_free_pct": the area, then the setting
    default: float | None  # None: only a profile (a GPU model) or the config gives one
    unit: str  # "%", "GiB", "s", "count"
    kind: Kind
    meaning: str  # what crossing it means, one line
    source: str  # where the default comes from (a peer's file, a document, or our reason)
    profiles: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Sku:
    """A GPU model whose rows' ``profiles`` hold its own values: matched on the product name
    every NVIDIA GPU of a node has."""

    name: str
    match: tuple[str, ...]  # substrings of the GPU's product name
    source: str


SKUS: tuple[Sku, ...] = (
    Sku(
        "H100 SXM",
        ("H100 80GB HBM3", "H100 SXM"),
        "busbw: AzHC conf/nd96isr_h100_v5.conf (check_nccl_allreduce 460); H2D/D2H and P2P: AzHC "
        "check_gpu_bw (48, 335); IB: gpud "
        "components/accelerator/nvidia/infiniband/threshold_default.go (8 ports at 400 Gb/s)",
    ),
    Sku(
        "H200",
        ("H200",),
        "busbw: AzHC conf/nd96isr_h200_v5.conf (check_nccl_allreduce 431); H2D/D2H and P2P: AzHC "
        "check_gpu_bw (48, 335); IB: gpud threshold_default.go (8 ports at 400 Gb/s)",
    ),
    Sku("B200", ("B200",), "IB: gpud threshold_default.go (8 ports at 400 Gb/s)"),
    Sku("GB200", ("GB200",), "IB: gpud threshold_default.go (8 ports at 400 Gb/s)"),
    Sku(
        "A100 SXM",
        ("A100-SXM4", "A100 SXM4"),
        "busbw: AzHC conf/nd96asr_v4.conf (check_nccl_allreduce 228); H2D/D2H and P2P: AzHC "
        "check_gpu_bw (21, 235); IB: gpud threshold_default.go (1 port at 200 Gb/s)",
    ),
)


THRESHOLDS: tuple[Threshold, ...] = (
    Threshold(
        "host.disk_free_pct",
        5.0,
        "%",
        "absolute",
        "a filesystem the job writes to (/, /tmp, /dev/shm, $HOME, --path, --mount) has less "
        "free space than this: warn",
        "imbue-ai/cluster-health health_checks/health_checks.py DiskSpace (at least 5 % free)",
    ),
    Threshold(
        "host.disk_full_pct",
        1.0,
        "%",
        "absolute",
        "less free space than this: the filesystem is full, fail",
        "ours: at 1 % (df's 99 %) a checkpoint, a core dump or NCCL's /dev/shm segment no "
        "longer fits; the 5 % warning above leaves room to act first",
    ),
    Threshold(
        "host.inodes_free_pct",
        5.0,
        "%",
        "absolute",
        "a filesystem has fewer free inodes than this: warn (none left: fail)",
        "LBNL NHC scripts/lbnl_fs.nhc check_fs_inodes, with imbue's 5 % for space applied to "
        "inodes (NHC publishes no default)",
    ),
    Threshold(
        "host.path_timeout_s",
        3.0,
        "s",
        "absolute",
        "a path that has not answered statvfs/access in this many seconds hangs (a stuck NFS "
        "server): its child is abandoned and the path fails",
        "ours: NFS's own major timeout is 60 s (nfs(5) timeo=600), far beyond a preflight; a "
        "local or healthy network filesystem answers in milliseconds",
    ),
    Threshold(
        "host.swap_used_pct",
        5.0,
        "%",
        "absolute",
        "swap in use above this share of RAM: the node is paging, warn",
        "ours: AzHC, LBNL NHC and imbue want swap off altogether (check_hw_swap, Swap); swap "
        "that is on but unused only slows nothing, so only its use warns",
    ),
    Threshold(
        "host.mem_available_pct",
        10.0,
        "%",
        "absolute",
        "MemAvailable below this share of MemTotal before the job starts: warn",
        "ours: LBNL NHC check_hw_mem_free and AMD Primus's low-available-memory check take the "
        "limit as an argument; 10 % is what page cache and a leftover process leave on an "
        "otherwise idle node",
    ),
    Threshold(
        "host.load_ratio",
        3.0,
        "x",
        "relative",
        "a node's 5-minute load per CPU is this many times the median node's (and above 1 per "
        "CPU): it is busy with something else, warn",
        "ours: LBNL NHC check_ps_loadavg takes absolute limits per site; compared across nodes "
        "a cluster-wide load (a loaded test bed, a shared machine) blames no node",
    ),
    Threshold(
        "host.memory_drift_pct",
        5.0,
        "%",
        "relative",
        "a node's MemTotal is this much below the median node's: a DIMM is missing, warn",
        "ours: one DIMM of 16 is 6.25 % of RAM; firmware reservations differ by far less "
        "(AzHC/NHC check_hw_physmem take absolute bounds)",
    ),
    Threshold(
        "host.dstate_seconds",
        0.5,
        "s",
        "absolute",
        "a process in uninterruptible sleep (D) at two looks this far apart is stuck: warn",
        "ours: a disk read leaves D within milliseconds; GCM check-dstate samples the same "
        "state field of /proc/<pid>/stat",
    ),
    Threshold(
        "kernel.aer_corrected_max",
        480.0,
        "count",
        "absolute",
        "corrected PCIe (AER) errors in the kernel log's window above this: warn",
        "NVIDIA DCGM nvvs/plugin_src/pcie/Pcie.cpp aer_threshold 480 (32 a minute for 15 minutes)",
    ),
    Threshold(
        "kernel.memory_ce_max",
        100.0,
        "count",
        "absolute",
        "corrected memory errors (EDAC CE, corrected APEI/GHES records) in the window above "
        "this: warn",
        "ours: LBNL NHC check_hw_mcelog fails on any; a DIMM that corrects a few errors over "
        "its life is healthy, one that corrects hundreds is about to fail",
    ),
    Threshold(
        "gpu.thermal_margin_c",
        5.0,
        "°C",
        "absolute",
        "a GPU this close to its slowdown temperature (or its memory to its limit): warn",
        "cluster-doctor's warning margin; at 0 the GPU slows down (gpud "
        "accelerator/nvidia/temperature/threshold.go)",
    ),
    Threshold(
        "gpu.sram_correctable",
        10000.0,
        "count",
        "absolute",
        "corrected SRAM ECC errors on a GPU above this: warn",
        "AzHC customTests/azure_gpu_ecc.nhc (SRAM correctable above 10,000 fails)",
    ),
    Threshold(
        "gpu.dram_correctable",
        20000000.0,
        "count",
        "absolute",
        "corrected DRAM ECC errors on a GPU above this: warn",
        "AzHC customTests/azure_gpu_ecc.nhc (DRAM correctable above 20,000,000 fails)",
    ),
    Threshold(
        "gpu.pcie_replays",
        80.0,
        "count",
        "absolute",
        "PCIe replays of a GPU above this: its link retries packets, warn",
        "DCGM nvvs/plugin_src/pcie/Pcie.cpp (max_pcie_replays 80)",
    ),
    Threshold(
        "gpu.nvlink_errors",
        5.0,
        "count",
        "absolute",
        "replay and CRC errors of a GPU's NVLinks at or above this: warn",
        "imbue health_checks/health_checks.py (MIN_NVLINK_ERRORS_TO_WARN 5)",
    ),
    Threshold(
        "rdma.symbol_error",
        10.0,
        "count",
        "absolute",
        "the symbol error counter of a port above this (since the counters were cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.link_error_recovery",
        10.0,
        "count",
        "absolute",
        "the link error recovery counter of a port above this (since the counters were cleared): "
        "warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.link_downed",
        10.0,
        "count",
        "absolute",
        "the link downed counter of a port above this (since the counters were cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_rcv_errors",
        10.0,
        "count",
        "absolute",
        "the port rcv errors counter of a port above this (since the counters were cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.local_link_integrity_errors",
        10.0,
        "count",
        "absolute",
        "the local link integrity errors counter of a port above this (since the counters were "
        "cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.excessive_buffer_overrun_errors",
        10.0,
        "count",
        "absolute",
        "the excessive buffer overrun errors counter of a port above this (since the counters were"
        " cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_rcv_remote_physical_errors",
        100.0,
        "count",
        "absolute",
        "the port rcv remote physical errors counter of a port above this (since the counters were"
        " cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_rcv_switch_relay_errors",
        100.0,
        "count",
        "absolute",
        "the port rcv switch relay errors counter of a port above this (since the counters were "
        "cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_xmit_discards",
        100.0,
        "count",
        "absolute",
        "the port xmit discards counter of a port above this (since the counters were cleared): "
        "warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_xmit_constraint_errors",
        100.0,
        "count",
        "absolute",
        "the port xmit constraint errors counter of a port above this (since the counters were "
        "cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.port_rcv_constraint_errors",
        100.0,
        "count",
        "absolute",
        "the port rcv constraint errors counter of a port above this (since the counters were "
        "cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.VL15_dropped",
        100.0,
        "count",
        "absolute",
        "the VL15 dropped counter of a port above this (since the counters were cleared): warn",
        "rdma-core infiniband-diags/etc/error_thresholds (ibqueryerrors)",
    ),
    Threshold(
        "rdma.symbol_error_per_s",
        10.0,
        "/s",
        "absolute",
        "symbol errors rising this fast on a port while the probe ran: warn",
        "NVSentinel docs/nic-health-monitor.md (symbol_error above 10/s: degraded)",
    ),
    Threshold(
        "rdma.link_error_recovery_per_min",
        5.0,
        "/min",
        "absolute",
        "link error recoveries this frequent while the probe ran: the link flaps",
        "NVSentinel docs/nic-health-monitor.md (link_error_recovery above 5/min: degraded)",
    ),
    Threshold(
        "gpu.bench_fraction",
        0.9,
        "x",
        "relative",
        "a GPU, pair or node below this fraction of its peers' median in the --gpu-tests "
        "measurements: warn",
        "cluster-doctor (relative): a GPU, pair or node under 90% of its peers' median; AzHC's gpu"
        " bandwidth test warns within 5% of its floor",
    ),
    Threshold(
        "allreduce.busbw_gbps",
        None,
        "GB/s",
        "absolute",
        "the node's own allreduce across its GPUs (--gpu-tests) below this bus bandwidth: warn",
        "per GPU model: SKUS below",
        {"H100 SXM": 460.0, "H200": 431.0, "A100 SXM": 228.0},
    ),
    Threshold(
        "rdma.ib_rate_gbps",
        None,
        "Gb/s",
        "absolute",
        "an active IB port below this rate: warn",
        "per GPU model: SKUS below",
        {"H100 SXM": 400.0, "H200": 400.0, "B200": 400.0, "GB200": 400.0, "A100 SXM": 200.0},
    ),
    Threshold(
        "rdma.ib_ports",
        None,
        "count",
        "absolute",
        "fewer active IB ports than this on the node: warn",
        "per GPU model: SKUS below",
        {"H100 SXM": 8.0, "H200": 8.0, "B200": 8.0, "GB200": 8.0, "A100 SXM": 1.0},
    ),
    Threshold(
        "gpu.h2d_gbps",
        None,
        "GB/s",
        "absolute",
        "pinned host-to-device or device-to-host copies below this (--gpu-tests): warn",
        "per GPU model: SKUS below",
        {"H100 SXM": 48.0, "H200": 48.0, "A100 SXM": 21.0},
    ),
    Threshold(
        "gpu.p2p_gbps",
        None,
        "GB/s",
        "absolute",
        "a GPU pair's peer-to-peer copies below this (--gpu-tests): warn",
        "per GPU model: SKUS below",
        {"H100 SXM": 335.0, "H200": 335.0, "A100 SXM": 235.0},
    ),
    Threshold(
        "allreduce.multinode_busbw_gbps",
        None,
        "GB/s",
        "absolute",
        "the multi-node allreduce below this bus bandwidth: warn (no default: set it where the "
        "fabric is known)",
        "ours: a fabric's figure depends on its NICs and switches; the peers set it per cluster "
        "(NVSentinel preflight-nccl-allreduce, GCM check-nccl)",
    ),
)
