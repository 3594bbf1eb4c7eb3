"""Make real NCCL failures with the real libnccl (no GPU needed) and save what NCCL prints.

Run by hand as root from the repository root: ``python tests/explain/capture/nccl_failures.py``.
Each scenario calls libnccl through ctypes in a fresh process with NCCL_DEBUG=INFO and bad
settings. Output goes to tests/fixtures/logs/real/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.netns import Netns, unique
from tests.explain.capture.bed import OUT

# argv[1]: "id" (ncclGetUniqueId only), "init" (then ncclCommInitRank as rank 1 of 2), or
# "magic" (then connect to the bootstrap root and send bytes that are not NCCL's magic).
CALLER = r"""
import ctypes, glob, os, socket, struct, sys, time
import nvidia.nccl
lib = ctypes.CDLL(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*"))[0])
lib.ncclGetErrorString.restype = ctypes.c_char_p
uid = ctypes.create_string_buffer(128)
rc = lib.ncclGetUniqueId(uid)
print(f"ncclGetUniqueId: {lib.ncclGetErrorString(rc).decode()}", flush=True)
if sys.argv[1] == "init" and rc == 0:
    comm = ctypes.c_void_p()
    rc = lib.ncclCommInitRank(ctypes.byref(comm), 2, uid, 1)
    print(f"ncclCommInitRank: {lib.ncclGetErrorString(rc).decode()}", flush=True)
if sys.argv[1] == "magic" and rc == 0:
    # ncclUniqueId embeds the root's sockaddr_in after an 8-byte handle: family, port, address.
    port = struct.unpack(">H", uid.raw[10:12])[0]
    with socket.create_connection((socket.inet_ntoa(uid.raw[12:16]), port)) as s:
        s.sendall(b"not-nccl" * 4)
        time.sleep(0.5)
    time.sleep(1.0)
"""


def capture(
    name: str, header: str, mode: str, env: dict[str, str], ns: Netns | None = None
) -> None:
    full = {**os.environ, "NCCL_DEBUG": "INFO", **env}
    argv = [sys.executable, "-c", CALLER, mode]
    if ns is not None:
        argv = ns.exec_argv(argv)
    proc = subprocess.run(
        argv, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
    )
    OUT.mkdir(parents=True, exist_ok=True)
    settings = " ".join(f"{k}={v}" for k, v in env.items())
    (OUT / name).write_text(
        f"# captured by tests/explain/capture/{Path(__file__).name}: {header}; {settings}\n"
        + proc.stdout
    )
    print(f"saved {name}")


def main() -> None:
    """Every scenario, in order."""
    capture("nccl-no-iface.log", "ncclGetUniqueId", "id", {"NCCL_SOCKET_IFNAME": "nosuchif0"})
    capture(
        "nccl-comm-id-no-subnet.log",
        "ncclGetUniqueId, address in no local subnet",
        "id",
        {"NCCL_COMM_ID": "198.19.255.1:29500"},
    )
    capture(
        "nccl-comm-id-invalid.log",
        "ncclGetUniqueId",
        "id",
        {"NCCL_COMM_ID": "no-such-host.invalid:29500"},
    )
    capture(
        "nccl-init-no-gpu.log",
        "ncclCommInitRank on a machine without a GPU driver",
        "init",
        {"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"},
    )
    capture(
        "nccl-wrong-magic.log",
        "a stranger connects to the bootstrap root",
        "magic",
        {"NCCL_SOCKET_IFNAME": "lo"},
    )
    # A namespace like a container with extra veths: what NCCL's bootstrap picks, for the context.
    ns = Netns(unique("cxn"))
    try:
        ns.add_veth_pair("eth0", "eth0p")  # no dummy driver here: a veth end stands for the NIC
        ns.ip("addr", "add", "198.18.5.1/24", "dev", "eth0")
        ns.add_veth_pair("vethA", "vethB")
        capture(
            "nccl-bootstrap-netns.log",
            "ncclGetUniqueId in a namespace with eth0 and a veth pair",
            "id",
            {"NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"},
            ns,
        )
    finally:
        ns.delete()


if __name__ == "__main__":
    main()
