"""A probe capture of an RDMA node, WRITTEN BY HAND: no HCA exists on the machines this project
can capture from. Every value follows the kernel's format strings in
drivers/infiniband/core/sysfs.c ("%d: %s\\n" for state, "%u: %s\\n" for phys_state,
"%d%s Gb/sec (%dX%s)\\n" for rate) and Documentation/ABI/stable/sysfs-class-infiniband
(link_layer "InfiniBand"/"Ethernet", gid_attrs/types "IB/RoCE v1"/"RoCE v2", gid_attrs/ndevs).

mlx5_0: InfiniBand, port 1 ACTIVE at 200 Gb/s HDR.
mlx5_1: RoCE on ens1f1np1, port 1 ACTIVE with only a link-local RoCE v2 GID and a v1 GID.
mlx5_2: InfiniBand, port 1 DOWN/Polling (cable out).
"""

from __future__ import annotations

from typing import Any

IB = "/sys/class/infiniband"


def _port(
    hca: str, state: str, phys: str, rate: str, layer: str, gids: dict[int, tuple[str, str, str]]
) -> dict[str, Any]:
    base = f"{IB}/{hca}/ports/1"
    files = {
        f"{base}/state": state,
        f"{base}/phys_state": phys,
        f"{base}/rate": rate,
        f"{base}/link_layer": layer,
    }
    for idx, (gid, kind, ndev) in gids.items():
        files[f"{base}/gids/{idx}"] = gid
        files[f"{base}/gid_attrs/types/{idx}"] = kind
        files[f"{base}/gid_attrs/ndevs/{idx}"] = ndev
    files[f"{base}/gids/{len(gids)}"] = "0000:0000:0000:0000:0000:0000:0000:0000\n"  # empty slot
    dirs = {f"{base}/gids": [str(i) for i in range(len(gids) + 1)]}
    return {"files": files, "dirs": dirs}


def ib_raw(uverbs: bool = True) -> dict[str, Any]:
    parts = [
        _port(
            "mlx5_0",
            "4: ACTIVE\n",
            "5: LinkUp\n",
            "200 Gb/sec (4X HDR)\n",
            "InfiniBand\n",
            {0: ("fe80:0000:0000:0000:0c42:a103:0012:3456\n", "IB/RoCE v1\n", "\n")},
        ),
        _port(
            "mlx5_1",
            "4: ACTIVE\n",
            "5: LinkUp\n",
            "100 Gb/sec (4X EDR)\n",
            "Ethernet\n",
            {
                0: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3457\n", "IB/RoCE v1\n", "ens1f1np1\n"),
                1: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3457\n", "RoCE v2\n", "ens1f1np1\n"),
            },
        ),
        _port("mlx5_2", "1: DOWN\n", "2: Polling\n", "10 Gb/sec (4X SDR)\n", "InfiniBand\n", {}),
    ]
    files: dict[str, Any] = {}
    dirs: dict[str, Any] = {
        IB: {"entries": ["mlx5_0", "mlx5_1", "mlx5_2"]},
        "/dev/infiniband": {"entries": ["rdma_cm", "uverbs0", "uverbs1", "uverbs2"]}
        if uverbs
        else {"error": {"kind": "absent", "detail": "No such file or directory"}},
    }
    for hca in ("mlx5_0", "mlx5_1", "mlx5_2"):
        dirs[f"{IB}/{hca}/ports"] = {"entries": ["1"]}
        files[f"{IB}/{hca}/node_type"] = "1: CA\n"
    for part in parts:
        files.update(part["files"])
        dirs.update({k: {"entries": v} for k, v in part["dirs"].items()})
    return {
        "probe": {"version": 1},
        "files": {k: {"text": v} for k, v in files.items()},
        "dirs": dirs,
        "links": {f"{IB}/mlx5_1/device": {"target": "../../../0000:3b:00.1"}},
        "commands": {},
        "values": {"load:libibverbs.so.1": {"value": True}},
    }
