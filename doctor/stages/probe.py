"""The probe: reads one node and prints its raw captures as one JSON document.

This file is shipped to nodes by piping its source into ``python3`` (``collect.LOADER``), so it
must run on the oldest Python a node may have (3.8) with the standard library only; psutil and
pynvml are used when importable and never required. It only reads: it never writes a file,
changes a setting or leaves a process behind (every command runs in its own process group, killed
whole on timeout).

It captures raw data (file contents, command results, values read in-process) and judges
nothing: the controller parses. That keeps every capture from a real machine usable as a test
fixture and a support bundle.

Usage: ``python3 probe.py [SPEC_JSON]`` or ``python3 - [SPEC_JSON] < probe.py``.
"""

import binascii
import contextlib
import errno
import json
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List  # noqa: F401  (type comments: the nodes may run Python 3.8)

# The credential rules, shared with the controller: shipped, their source runs above this one
# (doctor/stages/collect.py); imported from the tree otherwise (a run as a script).
if "hide_env" not in globals():
    if __name__ == "__main__":
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    from doctor.core.secrets import hide_env

PROBE_VERSION = 1
MAX_FILE_BYTES = 1 << 20
MAX_OUTPUT_BYTES = 4 << 20
DIST_HEADER_BYTES = 16 << 10  # a wheel's METADATA headers; the long description follows them
DEFAULT_SPEC = {
    "deadline": 20.0,
    "command_timeout": 5.0,
    "torch": False,
    "files": [],
    "commands": {},
}

# Environment variables worth capturing; everything else stays on the node.
ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "TP_SOCKET",
    "OMPI_",
    "PMIX_",
    "PRTE_",
    "UCX_",
    "CUDA_",
    "NSIGHT_CUDA_DEBUGGER",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
    "NVIDIA_",
    "HSA_",
    "HIP_",
    "ROCR_",
    "ROCM_",
    "RCCL_",
    "TORCH_",
    "MASTER_",
    "HOROVOD_",
    "SLURM_",
    "MPI",
    "I_MPI_",
    "FI_",
    "DEEPSPEED_",
    "LD_LIBRARY_PATH",
    "PATH",
    "PYTHONPATH",
    "HOME",
    "USER",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
)


def _error(kind, detail):
    return {"error": {"kind": kind, "detail": str(detail)}}


def _os_error(exc):
    if isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == errno.ENOENT:
        return _error("absent", exc.strerror or exc)
    if isinstance(exc, PermissionError):
        return _error("unreadable", exc.strerror or exc)
    return _error("failed", "%s: %s" % (type(exc).__name__, exc))


class Probe(object):
    """Holds the captures; every reader records success or the reason for failure."""

    def __init__(self, spec):
        self.spec = spec
        # Tests point the readers (read, listdir, readlink) at a written sysfs tree; captures
        # keep the node's own paths. On nodes the root is "" and paths are read as they are.
        self.root = spec.get("root") or ""
        self.files = {}
        self.dirs = {}
        self.links = {}
        self.commands = {}
        self.values = {}
        self.sections = {}
        self._lock = threading.Lock()
        # The RDMA counter files collect_rdma read, and when: second_sample reads them again.
        self.counter_paths = []  # type: List[str]
        self.counters_read = 0.0

    # -- readers -------------------------------------------------------------------------
    def read(self, path, limit=MAX_FILE_BYTES):
        """Read a text file once; returns its text or None (the reason is recorded)."""
        if path in self.files:
            return self.files[path].get("text")
        try:
            with open(self.root + path, "rb") as handle:
                data = handle.read(limit + 1)
            entry = {"text": data[:limit].decode("utf-8", "replace")}  # type: Dict[str, Any]
            if len(data) > limit:
                entry["truncated"] = True
        except (OSError, ValueError) as exc:
            entry = _os_error(exc)
        with self._lock:
            self.files[path] = entry
        return entry.get("text")

    def listdir(self, path):
        if path in self.dirs:
            return self.dirs[path].get("entries")
        try:
            entry = {"entries": sorted(os.listdir(self.root + path))}
        except OSError as exc:
            entry = _os_error(exc)
        with self._lock:
            self.dirs[path] = entry
        return entry.get("entries")

    def readlink(self, path):
        if path in self.links:
            return self.links[path].get("target")
        try:
            entry = {"target": os.readlink(self.root + path)}
        except OSError as exc:
            entry = _os_error(exc)
        with self._lock:
            self.links[path] = entry
        return entry.get("target")

    def realpath(self, path):
        """Record where a sysfs path really leads (its device's place in the PCI tree)."""

        def resolve():
            real = os.path.realpath(self.root + path)
            return real[len(self.root) :] if self.root and real.startswith(self.root) else real

        return self.value("realpath:" + path, resolve)

    def value(self, name, fn):
        """Record the result of an in-process call, or the error it raised."""
        try:
            result = {"value": fn()}
        except Exception as exc:  # recorded, never raised: one bad call must not sink the probe
            result = _error("failed", "%s: %s" % (type(exc).__name__, exc))
        with self._lock:
            self.values[name] = result
        return result.get("value")

    def run(self, name, argv, timeout=None, env=None, stdin_text=None):
        """Run a command in its own process group; kill the whole group on timeout."""
        timeout = self.spec["command_timeout"] if timeout is None else timeout
        started = time.monotonic()
        entry = {"argv": list(argv)}  # type: Dict[str, Any]
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            entry.update(_os_error(exc))
        else:
            try:
                out, err = proc.communicate(
                    None if stdin_text is None else stdin_text.encode(), timeout=timeout
                )
                entry["rc"] = proc.returncode
                entry["stdout"] = out[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
                entry["stderr"] = err[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                entry.update(_error("timeout", "no answer within %.1fs" % timeout))
        entry["seconds"] = round(time.monotonic() - started, 4)
        with self._lock:
            self.commands[name] = entry
        return entry

    def to_json(self):
        return {
            "probe": {
                "version": PROBE_VERSION,
                "python": platform.python_version(),
                "executable": sys.executable,
                "sections": self.sections,
            },
            "files": self.files,
            "dirs": self.dirs,
            "links": self.links,
            "commands": self.commands,
            "values": self.values,
        }


def _kill_group(proc):
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.communicate(timeout=2)


def which(name):
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


# -- sections ------------------------------------------------------------------------------
# Each section reads one area. Sections run concurrently, each in its own thread, and the
# whole probe answers by its deadline even if one section hangs (a stuck NFS home, say).


def collect_system(p):
    for path in (
        "/etc/os-release",
        "/proc/sys/kernel/random/boot_id",
        "/proc/sys/kernel/hostname",
        "/sys/devices/system/node/online",
        "/sys/devices/system/cpu/online",
        "/proc/1/cgroup",
        "/proc/self/cgroup",
        "/proc/uptime",
    ):
        p.read(path)
    for marker in ("/.dockerenv", "/run/.containerenv"):
        p.value("exists:" + marker, lambda m=marker: os.path.exists(m))
    # systemd-nspawn and podman set a lower-case "container" variable.
    p.value("env:container", lambda: os.environ.get("container"))  # noqa: SIM112
    # os.uname: platform.uname() runs `uname -p` for a processor name nothing reads.
    p.value("uname", lambda: list(os.uname()))
    p.value("hostname", socket.gethostname)
    p.value("fqdn", socket.getfqdn)
    p.value("cpu_count", os.cpu_count)
    p.value("time", time.time)
    p.value("python", lambda: {"version": platform.python_version(), "executable": sys.executable})
    p.value("user", lambda: {"uid": os.getuid(), "home": os.path.expanduser("~")})


def collect_limits(p):
    def statvfs(path):
        st = os.statvfs(path)
        return {"size": st.f_frsize * st.f_blocks, "free": st.f_frsize * st.f_bavail}

    p.value("statvfs:/dev/shm", lambda: statvfs("/dev/shm"))
    for name in ("RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_STACK"):
        p.value("rlimit:" + name, lambda n=name: list(resource.getrlimit(getattr(resource, n))))
    p.read("/proc/self/mountinfo")


def collect_env(p):
    def captured():
        # Credentials are hidden here, before the capture leaves the node (doctor/core/secrets.py).
        return hide_env({k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)})

    p.value("env", captured)


PCI_LINK_ATTRS = ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")


def _config_hex(device):
    with open(device + "/config", "rb") as handle:
        return binascii.hexlify(handle.read(4096)).decode("ascii")


def collect_pci(p):
    """Every PCI device's identity, place in the tree and NUMA node (GPUs, NICs, HCAs, bridges)."""
    root = "/sys/bus/pci/devices"
    devices = p.listdir(root) or []
    above = set()  # bridges between the root complex and a GPU or a NIC
    for dev in devices:
        path = root + "/" + dev
        for attr in ("class", "vendor", "device", "numa_node", "local_cpulist"):
            p.read(path + "/" + attr)
        p.readlink(path + "/driver")
        # The resolved path (…/pci0000:00/0000:00:01.0/0000:01:00.0) gives the bridge chain
        # that GPU-NIC distances are computed from, the way NCCL's topology code does.
        real = p.realpath(path)
        klass = p.read(path + "/class") or ""
        vendor = (p.read(path + "/vendor") or "").strip()
        gpu = klass[:4] in ("0x03", "0x12") and vendor in (NVIDIA_VENDOR, AMD_VENDOR)
        if isinstance(real, str) and (klass.startswith("0x02") or gpu):
            above.update(real.split("/")[:-1])
        if klass.startswith("0x02") or gpu:  # the link each GPU and NIC trained at
            for attr in PCI_LINK_ATTRS:
                p.read(path + "/" + attr)
    for dev in devices:
        path = root + "/" + dev
        if dev in above and (p.read(path + "/class") or "").startswith("0x0604"):
            # A bridge's config space holds its ACS control (an extended capability, past the
            # first 256 bytes, which only root may read): redirected peer-to-peer traffic
            # between GPUs and NICs below it goes round the root complex. Only these bridges:
            # a large server has a hundred, 8 KiB of capture each.
            p.value("pci-config:" + path, lambda d=path: _config_hex(p.root + d))


# -- topo: NIC placement, nvidia-smi's matrix, raw NVML answers -----------------------------


def _nvml_call(fn, *args):
    """One NVML answer, or the error it raised (by class name), so that every answer is kept."""
    try:
        answer = fn(*args)
    except Exception as exc:  # NVMLError_NotSupported and friends are data here
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    if isinstance(answer, bytes):  # older bindings return bytes for strings
        return answer.decode("utf-8", "replace")
    return answer


def _nvml_links(nvml, handle):
    links = []  # type: List[Dict[str, Any]]
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _nvml_call(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if isinstance(state, dict):  # NOT_SUPPORTED (no NVLink) or INVALID_ARGUMENT (past the last)
            if not links:
                links.append({"link": link, "state": state})
            break
        remote = _nvml_call(nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
        entry = {
            "link": link,
            "state": state,
            "p2p": _nvml_call(
                nvml.nvmlDeviceGetNvLinkCapability,
                handle,
                link,
                getattr(nvml, "NVML_NVLINK_CAP_P2P_SUPPORTED", 0),
            ),
            "remote_bus_id": remote
            if isinstance(remote, dict)
            else _nvml_call(lambda r=remote: r.busId),
        }
        if hasattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType"):
            entry["remote_type"] = _nvml_call(
                nvml.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link
            )
        # The counters `nvidia-smi nvlink -e` shows, since the driver loaded (nvml.h
        # nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3).
        entry["errors"] = {
            name: _nvml_call(nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
            for counter, name in enumerate(("replay", "recovery", "crc_flit", "crc_data"))
        }
        links.append(entry)
    return links


def _nvml_topology():
    """Raw NVML answers for the topology: devices, NVLinks, common ancestors, P2P status."""
    try:
        import pynvml as nvml  # optional (nvidia-ml-py): used only when importable
    except ImportError as exc:
        raise LookupError("pynvml is not importable: %s" % exc) from None  # Probe.value keeps it

    nvml.nvmlInit()
    try:
        # Affinity masks are arrays of 64-bit words; ask for room for 1024 CPUs at least (NVML
        # leaves the rest zero) so CPU numbers above os.cpu_count() (offline CPUs) still fit.
        words = max(16, ((os.cpu_count() or 1) + 63) // 64)
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        devices = []
        for index, handle in enumerate(handles):
            pci = _nvml_call(nvml.nvmlDeviceGetPciInfo, handle)
            device = {
                "index": index,
                "name": _nvml_call(nvml.nvmlDeviceGetName, handle),
                "bus_id": pci if isinstance(pci, dict) else _nvml_call(lambda i=pci: i.busId),
                "cpu_affinity": _nvml_call(
                    lambda h=handle: list(nvml.nvmlDeviceGetCpuAffinity(h, words))
                ),
                "nvlinks": _nvml_links(nvml, handle),
            }
            if hasattr(nvml, "nvmlDeviceGetMemoryAffinity"):
                device["memory_affinity"] = _nvml_call(
                    lambda h=handle: list(nvml.nvmlDeviceGetMemoryAffinity(h, words, 0))
                )
            if hasattr(nvml, "nvmlDeviceGetNumaNodeId"):
                device["numa_node_id"] = _nvml_call(nvml.nvmlDeviceGetNumaNodeId, handle)
            devices.append(device)
        caps = {"read": 0, "write": 1, "nvlink": 2}
        pairs = []
        for i in range(count):
            for j in range(i + 1, count):
                pair = {
                    "a": i,
                    "b": j,
                    "common_ancestor": _nvml_call(
                        nvml.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j]
                    ),
                }
                for cap, default in sorted(caps.items()):
                    index = getattr(nvml, "NVML_P2P_CAPS_INDEX_" + cap.upper(), default)
                    pair["p2p_" + cap] = _nvml_call(
                        nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j], index
                    )
                pairs.append(pair)
        return {
            "driver": _nvml_call(nvml.nvmlSystemGetDriverVersion),
            "devices": devices,
            "pairs": pairs,
        }
    finally:
        nvml.nvmlShutdown()


def collect_topo(p):
    """Where each NIC and HCA sits on PCI, `nvidia-smi topo -m`, and NVML's topology answers."""
    for iface in p.listdir("/sys/class/net") or []:
        device = "/sys/class/net/%s/device" % iface
        # Software devices have no "device" link; realpath() would invent a path for them.
        if os.path.exists(p.root + device):
            p.realpath(device)
    for hca in p.listdir("/sys/class/infiniband") or []:
        base = "/sys/class/infiniband/" + hca
        p.realpath(base + "/device")
        p.listdir(base + "/device/net")
        for port in p.listdir(base + "/ports") or []:
            for attr in ("state", "link_layer", "rate"):
                p.read("%s/ports/%s/%s" % (base, port, attr))
    if which("nvidia-smi"):
        p.run("nvidia-smi:topo", ["nvidia-smi", "topo", "-m"])
    else:
        p.commands["nvidia-smi:topo"] = dict(
            argv=["nvidia-smi", "topo", "-m"], **_error("absent", "nvidia-smi is not on PATH")
        )
    if _nvidia_present(p):
        p.value("nvml:topology", _nvml_topology)
    else:  # importing pynvml alone costs a tenth of the probe's time, for nothing here
        p.values["nvml:topology"] = _error(
            "absent", "no NVIDIA kernel module and no NVIDIA PCI device"
        )


# -- network interfaces and RDMA (NIC selection) -------------------------------------------
NET_ROOT = "/sys/class/net"
IB_ROOT = "/sys/class/infiniband"
NET_ATTRS = (
    "type",
    "flags",
    "mtu",
    "carrier",
    "speed",
    "operstate",
    "ifindex",
    "iflink",
    "tun_flags",
)


def _sockaddr(ctypes, ptr):
    """(family, address text, IPv6 scope id) of a struct sockaddr pointer, or None."""
    if not ptr:
        return None
    family = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_ushort))[0]
    raw = ctypes.string_at(ptr, 28)
    if family == socket.AF_INET:
        return family, socket.inet_ntop(socket.AF_INET, raw[4:8]), 0
    if family == socket.AF_INET6:
        scope = int.from_bytes(raw[24:28], sys.byteorder)
        return family, socket.inet_ntop(socket.AF_INET6, raw[8:24]), scope
    return None


def getifaddrs():
    """libc getifaddrs() in its own order: the exact list NCCL and Gloo walk."""
    import ctypes

    class Ifaddrs(ctypes.Structure):
        pass

    Ifaddrs._fields_ = [
        ("ifa_next", ctypes.POINTER(Ifaddrs)),
        ("ifa_name", ctypes.c_char_p),
        ("ifa_flags", ctypes.c_uint),
        ("ifa_addr", ctypes.c_void_p),
        ("ifa_netmask", ctypes.c_void_p),
        ("ifa_ifu", ctypes.c_void_p),
        ("ifa_data", ctypes.c_void_p),
    ]
    # The interpreter's own symbols include libc's; find_library("c") would run ldconfig -p.
    libc = ctypes.CDLL(None, use_errno=True)
    head = ctypes.POINTER(Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        raise OSError(ctypes.get_errno(), "getifaddrs failed")
    out = []
    try:
        node = head
        while node:
            ifa = node.contents
            addr = _sockaddr(ctypes, ifa.ifa_addr)
            if addr is not None:
                mask = _sockaddr(ctypes, ifa.ifa_netmask)
                out.append(
                    {
                        "name": ifa.ifa_name.decode("utf-8", "replace"),
                        "flags": ifa.ifa_flags,
                        "family": addr[0],
                        "address": addr[1],
                        "netmask": mask[1] if mask else None,
                        "scope_id": addr[2],
                    }
                )
            node = ifa.ifa_next
    finally:
        libc.freeifaddrs(head)
    return out


def resolve_hostname():
    """What Gloo and TensorPipe do without an interface: resolve the hostname, try to bind."""
    out = []
    name = socket.gethostname()
    for family, _kind, _proto, _canon, sockaddr in socket.getaddrinfo(
        name, None, socket.AF_UNSPEC, socket.SOCK_STREAM
    ):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((sockaddr[0], 0, *sockaddr[2:]))
            bindable = True
        except OSError:
            bindable = False
        finally:
            sock.close()
        out.append({"family": family, "address": sockaddr[0], "bindable": bindable})
    return {"hostname": name, "addresses": out}


def collect_net(p):
    """Interfaces (sysfs, netlink via ip -j, getifaddrs), routes, resolver, Open MPI config."""
    for name in p.listdir(NET_ROOT) or []:
        base = NET_ROOT + "/" + name
        for attr in NET_ATTRS:
            p.read(base + "/" + attr)
        for link in ("device", "device/driver", "master"):
            p.readlink(base + "/" + link)
        p.read(base + "/device/numa_node")
        for marker in ("bridge", "brport", "bonding", "bonding_slave"):
            p.value("exists:" + base + "/" + marker, lambda m=base + "/" + marker: os.path.isdir(m))
    p.value("getifaddrs", getifaddrs)
    p.value("resolve:hostname", resolve_hostname)
    if which("ip"):
        p.run("ip-link", ["ip", "-j", "-d", "link", "show"])
        p.run("ip-addr", ["ip", "-j", "addr", "show"])
    for path in ("/proc/net/route", "/proc/net/ipv6_route", "/proc/net/if_inet6"):
        p.read(path)
    # Open MPI's MCA parameter files (the NCCL ones are read by collect_nccl).
    conf = [
        os.path.expanduser("~") + "/.openmpi/mca-params.conf",
        "/etc/openmpi/openmpi-mca-params.conf",
    ]
    mpirun = which("mpirun")
    if mpirun:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(mpirun)))
        conf.append(prefix + "/etc/openmpi-mca-params.conf")
    for path in conf:
        p.read(path)


# Kernel modules whose presence (a /sys/module/<name> folder, no lsmod) the RDMA facts read.
RDMA_MODULES = ("nvidia_peermem", "nv_peer_mem", "gdrdrv", "mlx5_core", "mlx5_ib", "ib_core", "efa")
COUNTER_BYTES = 64  # a counter file holds one number


def collect_rdma(p):
    """RDMA devices from sysfs (no ibstat), the verbs device nodes, GPUDirect RDMA modules."""
    counters = []
    efa = False
    for hca in p.listdir(IB_ROOT) or []:
        base = IB_ROOT + "/" + hca
        for attr in ("node_type", "fw_ver", "hca_type", "board_id"):
            p.read(base + "/" + attr)
        p.readlink(base + "/device")
        p.listdir(base + "/device/net")
        efa = (p.readlink(base + "/device/driver") or "").endswith("/efa") or efa
        for port in p.listdir(base + "/ports") or []:
            pbase = base + "/ports/" + port
            for attr in ("state", "phys_state", "rate", "link_layer", "lid"):
                p.read(pbase + "/" + attr)
            # The error counters, read now and again as the probe ends (second_sample): their
            # growth over the probe's own time is a rate that costs no extra second.
            for folder in ("counters", "hw_counters"):
                for name in p.listdir(pbase + "/" + folder) or []:
                    path = pbase + "/" + folder + "/" + name
                    if p.read(path, COUNTER_BYTES) is not None:
                        counters.append(path)
            for idx in p.listdir(pbase + "/gids") or []:
                gid = p.read(pbase + "/gids/" + idx)
                # Empty slots (all zeros) have no attributes; reading them only fails.
                if gid and gid.strip().replace("0", "").replace(":", ""):
                    p.read(pbase + "/gid_attrs/types/" + idx)
                    p.read(pbase + "/gid_attrs/ndevs/" + idx)
    p.listdir("/dev/infiniband")
    p.read("/proc/modules")
    # The three paths NCCL's GPUDirect RDMA probe checks (src/transport/net_ib/gdr.cc).
    for path in (
        "/sys/kernel/mm/memory_peers/nv_mem/version",
        "/sys/module/nvidia_peermem/version",
        "/sys/module/nv_peer_mem/version",
    ):
        p.read(path)

    for module in RDMA_MODULES:
        folder = "/sys/module/" + module
        if p.value("exists:" + folder, lambda f=folder: os.path.isdir(p.root + f)):
            p.read(folder + "/version")
    fi_info = which("fi_info") or ("/opt/amazon/efa/bin/fi_info" if efa else None)
    if efa and fi_info and os.path.exists(fi_info):
        p.run("fi_info:efa", [fi_info, "-p", "efa"])
    p.counter_paths = counters
    p.counters_read = time.monotonic()

    def verbs():
        import ctypes

        ctypes.CDLL("libibverbs.so.1")
        return True

    p.value("load:libibverbs.so.1", verbs)


def second_sample(p):
    """The RDMA counters read again: the section read them first, the probe's other sections ran
    since, so the interval is the probe's own (a second or so on a GPU node), not added time."""
    if not p.counter_paths:
        return
    again = {}
    for path in p.counter_paths:
        try:
            with open(p.root + path, "rb") as handle:
                again[path] = handle.read(COUNTER_BYTES).decode("ascii", "replace")
        except (OSError, ValueError):
            continue
    seconds = round(time.monotonic() - p.counters_read, 4)
    p.values["rdma:counters-later"] = {"value": {"seconds": seconds, "files": again}}


def collect_extra(p):
    """Files and commands that check plugins asked for."""
    for path in p.spec.get("files", []):
        p.read(path)
    for name, argv in sorted(p.spec.get("commands", {}).items()):
        if which(argv[0]) or os.path.isabs(argv[0]):
            p.run("extra:" + name, argv)
        else:
            p.commands["extra:" + name] = dict(argv=list(argv), **_error("absent", "not on PATH"))


# -- peers (cluster helper): how this node resolves the cluster's names ----------------------


def _addresses(name):
    infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    return sorted(set(info[4][0] for info in infos))


def _installed_doctor():
    """The cluster-doctor installed for this interpreter: the first cluster_doctor-*.dist-info
    (or .egg-info) on sys.path, where importlib.metadata would find it. Read by hand: importing
    importlib.metadata alone costs a third of the probe's CPU time."""
    for folder in sys.path:
        try:
            entries = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if not entry.lower().startswith("cluster_doctor-"):
                continue
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            for meta in ("METADATA", "PKG-INFO"):
                try:
                    with open(os.path.join(folder, entry, meta), encoding="utf-8") as headers:
                        for line in headers:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip()
                            if not line.strip():  # the end of the headers
                                break
                except OSError:
                    continue
    return None


def collect_peers(p):
    """Resolve every name the controller asked about and this node's own hostname."""
    names = list(p.spec.get("resolve", []))
    names.append(socket.gethostname())
    for name in names:
        p.value("resolve:" + name, lambda n=name: _addresses(n))
    p.value("doctor_version", _installed_doctor)


# -- node facts: NCCL, driver, GPUs, MPI, frameworks ---------------------------------------
# Library calls (libnccl, libcuda, NVML) run in a child interpreter: a library that crashes or
# hangs takes only that child with it, and the child is killed at its deadline.

NCCL_MARK = "@@cluster-doctor-nccl@@"
NCCL_LOG_ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET",
}
NCCL_CALL_TIMEOUT = 4.0
NCCL_LIBS = ("libnccl.so", "librccl.so")
# Loads one libnccl, asks its version and a unique id (which runs NCCL's own bootstrap interface
# selection, no GPU needed; the listening socket dies with this child), and reads the version
# banner NCCL keeps as a literal in the binary. NCCL logs to stdout, so our result is one line
# behind a marker and everything else is NCCL's log.
NCCL_SNIPPET = r"""
import ctypes, json, mmap, re, sys
out = {}
try:
    with open(sys.argv[1], "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        banner = re.compile(rb"[NR]CCL version[ :]*\d+\.\d+\.\d+[^\x00\s]*")
        # find() scans at memchr speed; the regex, tried only where the literal is, checks
        # the rest (a regex search from byte 0 cost 20 ms per library, 0.4 s over 64 MB).
        found, at = None, m.find(b"CCL version", 1, 64 << 20)
        while found is None and at > 0:
            found = banner.match(m, at - 1)
            at = m.find(b"CCL version", at + 1, 64 << 20)
        out["banner"] = found.group(0).decode("ascii", "replace") if found else None
except Exception as exc:
    out["banner_error"] = "%s: %s" % (type(exc).__name__, exc)
try:
    lib = ctypes.CDLL(sys.argv[1])
    code = ctypes.c_int(0)
    out["version_rc"] = lib.ncclGetVersion(ctypes.byref(code))
    out["version_code"] = code.value
    sys.stdout.flush()
    uid = ctypes.create_string_buffer(128)
    out["unique_id_rc"] = lib.ncclGetUniqueId(uid)
    out["unique_id_hex"] = uid.raw.hex()
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.flush()
sys.stdout.write("\n%s%s\n" % (sys.argv[2], json.dumps(out)))
sys.stdout.flush()
"""


def _site_dirs():
    """This interpreter's import path, in order: where wheels and frameworks would be found."""
    return [d for d in sys.path if d and os.path.isdir(d)]


def _ldconfig(p):
    for candidate in (which("ldconfig"), "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        if candidate and os.path.isfile(candidate):
            return p.run("ldconfig", [candidate, "-p"])
    p.commands["ldconfig"] = dict(argv=["ldconfig", "-p"], **_error("absent", "not found"))
    return p.commands["ldconfig"]


def nccl_lib_dirs(p):
    """Every folder a libnccl or NCCL net plugin could be loaded from, listed in the capture."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    # ROCm's own librccl, where ROCm says it is installed ($ROCM_PATH, else /opt/rocm).
    for rocm in rocm_dirs():
        dirs.append(rocm + "/lib")
    for site in p.value("sys.path", _site_dirs) or []:
        # nvidia-nccl-cu12/cu13 wheels, the CUDA 13 combined wheel layout, torch's own copy;
        # listed only under folders that hold those packages, to keep the capture small.
        for sub in ("nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib", "torch/lib"):
            if os.path.isdir(os.path.join(site, sub.split("/")[0])):
                dirs.append(os.path.join(site, sub))
    out = []
    for folder in dirs:
        if folder not in out:
            out.append(folder)
            p.listdir(folder)
    return out


def module_dir(p, name):
    """Where ``import name`` would load a top-level package from, found without importing it."""

    def find():
        import importlib.util

        spec = importlib.util.find_spec(name)
        return os.path.dirname(spec.origin) if spec is not None and spec.origin else None

    return p.value("module:" + name, find)


def collect_nccl(p):
    torch = module_dir(p, "torch")
    if torch:
        p.read(os.path.join(torch, "version.py"))
    conf = {
        "NCCL_CONF_FILE": os.environ.get("NCCL_CONF_FILE"),
        "user": os.path.join(os.path.expanduser("~"), ".nccl.conf"),
        "system": "/etc/nccl.conf",
    }
    p.value("nccl:conf_files", lambda: conf)
    for path in conf.values():
        if path:
            p.read(path)
    env = dict(os.environ)
    env.update(NCCL_LOG_ENV)
    env.pop("NCCL_DEBUG_FILE", None)  # the log must come back to us, not land in a file
    children = {}  # type: Dict[str, threading.Thread]

    def ask(path):
        """Start one child per real file, as soon as it is found (they overlap ldconfig)."""
        real = p.value("realpath:" + path, lambda: os.path.realpath(path))
        if real in children:
            return
        argv = [sys.executable, "-I", "-S", "-c", NCCL_SNIPPET, real, NCCL_MARK]
        child = threading.Thread(
            target=p.run,
            args=("nccl:" + real, argv),
            kwargs={"timeout": NCCL_CALL_TIMEOUT, "env": env},
        )
        child.daemon = True
        child.start()
        children[real] = child

    # RCCL (librccl.so) is NCCL's API for AMD GPUs: the same child asks it the same questions.
    for folder in nccl_lib_dirs(p):
        for entry in p.listdir(folder) or []:
            if entry.startswith(NCCL_LIBS):
                ask(os.path.join(folder, entry))
    for line in (_ldconfig(p).get("stdout") or "").splitlines():
        name, _, target = line.strip().partition(" => ")
        if name.startswith(NCCL_LIBS) and target:
            ask(target.strip())
    for child in children.values():
        child.join()


NVIDIA_MARK = "@@cluster-doctor-nvidia@@"
NVIDIA_VENDOR = "0x10de"
# libcuda's cuDriverGetVersion (needs no cuInit, no GPU context) and, when pynvml is importable,
# NVML's view of the driver and every GPU. Each value is {"value": ...} or {"error": "..."}.
NVIDIA_SNIPPET = r"""
import ctypes, json, sys


def call(fn, *args):
    try:
        value = fn(*args)
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return {"value": value}


def cuda_version():
    code = ctypes.c_int(0)
    rc = ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(code))
    if rc != 0:
        raise RuntimeError("cuDriverGetVersion returned CUresult %d" % rc)
    return code.value


def nv(name, *args):
    # A call nvidia-ml-py may not have (older releases lack the newer functions): its absence
    # is that answer's error, not the child's end.
    return call(lambda: getattr(pynvml, name)(*args))


def fabric_state(pynvml, h):
    # nvmlGpuFabricInfo_t.state (Hopper and later); older GPUs raise NotSupported. nvidia-ml-py
    # fills the struct it is handed (called without one on an H100: TypeError, no state).
    info = pynvml.c_nvmlGpuFabricInfo_t()
    pynvml.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
    return info.state


out = {"cuDriverGetVersion": call(cuda_version)}
try:
    import pynvml
except Exception as exc:
    out["pynvml"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
else:
    out["pynvml"] = {"value": pynvml.__file__}
    out["nvmlInit"] = call(pynvml.nvmlInit)
    if "value" in out["nvmlInit"]:
        out["driver_version"] = call(pynvml.nvmlSystemGetDriverVersion)
        out["cuda_driver_version"] = call(pynvml.nvmlSystemGetCudaDriverVersion)
        out["device_count"] = call(pynvml.nvmlDeviceGetCount)
        out["devices"] = []
        for index in range(out["device_count"].get("value") or 0):
            handle = call(pynvml.nvmlDeviceGetHandleByIndex, index)
            if "error" in handle:
                out["devices"].append({"index": index, "handle": handle})
                continue
            h = handle["value"]
            out["devices"].append({
                "index": index,
                "name": call(pynvml.nvmlDeviceGetName, h),
                "uuid": call(pynvml.nvmlDeviceGetUUID, h),
                "bus_id": call(lambda: pynvml.nvmlDeviceGetPciInfo(h).busId),
                "memory_total": call(lambda: pynvml.nvmlDeviceGetMemoryInfo(h).total),
                "persistence_mode": call(pynvml.nvmlDeviceGetPersistenceMode, h),
                "ecc_mode": call(pynvml.nvmlDeviceGetEccMode, h),
                # (error type, counter type): 1 = uncorrected, 0 = corrected; 0 = volatile,
                # 1 = aggregate (pynvml NVML_MEMORY_ERROR_TYPE_*, NVML_VOLATILE/AGGREGATE_ECC).
                "ecc_uncorrected_volatile": call(pynvml.nvmlDeviceGetTotalEccErrors, h, 1, 0),
                "ecc_uncorrected_aggregate": call(pynvml.nvmlDeviceGetTotalEccErrors, h, 1, 1),
                "ecc_corrected_volatile": call(pynvml.nvmlDeviceGetTotalEccErrors, h, 0, 0),
                # Health (doctor/facts/nvidia/gpu_health.py): enums and masks as NVML returns them.
                "compute_mode": call(pynvml.nvmlDeviceGetComputeMode, h),
                "mig_mode": call(pynvml.nvmlDeviceGetMigMode, h),
                "pcie_gen": call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_gen_max": call(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "pcie_width": call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_width_max": call(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                "throttle": call(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h),
                # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0, DOUBLE_BIT = 1
                "retired_sbe": call(lambda: len(pynvml.nvmlDeviceGetRetiredPages(h, 0))),
                "retired_dbe": call(lambda: len(pynvml.nvmlDeviceGetRetiredPages(h, 1))),
                "retired_pending": call(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h),
                "remapped_rows": call(lambda: list(pynvml.nvmlDeviceGetRemappedRows(h))),
                "processes": call(lambda: [
                    {"pid": p.pid, "used_memory": p.usedGpuMemory}
                    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                ]),
                "fabric_state": call(fabric_state, pynvml, h),
                # Vitals (doctor/facts/nvidia/gpu_vitals.py). NVML_TEMPERATURE_GPU 0; thresholds
                # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 1; NVML_CLOCK_GRAPHICS 0, MEM 2;
                # memory locations NVML_MEMORY_LOCATION_DRAM 2, SRAM 7 (nvml.h).
                "temperature": nv("nvmlDeviceGetTemperature", h, 0),
                "temp_slowdown": nv("nvmlDeviceGetTemperatureThreshold", h, 1),
                "power_limit": nv("nvmlDeviceGetEnforcedPowerLimit", h),
                "power_default": nv("nvmlDeviceGetPowerManagementDefaultLimit", h),
                "ecc_dram_corrected": nv("nvmlDeviceGetMemoryErrorCounter", h, 0, 1, 2),
                "ecc_sram_corrected": nv("nvmlDeviceGetMemoryErrorCounter", h, 0, 1, 7),
                "ecc_sram_uncorrected": nv("nvmlDeviceGetMemoryErrorCounter", h, 1, 1, 7),
                "inforom_valid": nv("nvmlDeviceValidateInforom", h),
                "inforom_version": nv("nvmlDeviceGetInforomImageVersion", h),
                "pcie_replays": nv("nvmlDeviceGetPcieReplayCounter", h),
                "app_clock": nv("nvmlDeviceGetApplicationsClock", h, 0),
                "app_clock_default": nv("nvmlDeviceGetDefaultApplicationsClock", h, 0),
                "app_mem_clock": nv("nvmlDeviceGetApplicationsClock", h, 2),
                "app_mem_clock_default": nv("nvmlDeviceGetDefaultApplicationsClock", h, 2),
                "vbios": nv("nvmlDeviceGetVbiosVersion", h),
                "gsp_firmware": nv("nvmlDeviceGetGspFirmwareVersion", h),
            })
        call(pynvml.nvmlShutdown)
sys.stdout.write(sys.argv[1] + json.dumps(out) + "\n")
"""


GPU_TESTS_MARK = "@@cluster-doctor-gpu-tests@@"
GPU_TESTS_SECONDS = 60.0  # what --gpu-tests adds to the probe's deadline, all tests together
# Short GPU tests through torch (only with --gpu-tests): the node's own allreduce across its GPUs
# (torch.cuda.nccl.all_reduce: one process, NCCL over NVLink/PCIe) at 256 MB to 4 GB, and per GPU
# a bf16 GEMM (TFLOPS, finite result), a device-to-device copy (memory bandwidth), pinned
# host-to-device and back, and a copy to each other GPU (P2P). Each test stops where the budget
# would be passed; results are numbers only, judged by checks/gpu_bench.py.
GPU_TESTS_SNIPPET = r"""
import json, sys, time
budget, started, out = float(sys.argv[2]), time.monotonic(), {}
MB256, GB = 256 << 20, 1 << 30


def left():
    return budget - (time.monotonic() - started)


def timed(fn, sync, reps):
    fn()
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t) / reps


try:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    n = torch.cuda.device_count()
    every = lambda: [torch.cuda.synchronize(i) for i in range(n)]
    out.update(gpus=n, name=torch.cuda.get_device_name(0), allreduce=[], per_gpu=[], p2p={})
    for size in (MB256, GB, 4 * GB) if n > 1 else ():
        if left() < 15:
            break
        try:
            bufs = [torch.ones(size // 2, dtype=torch.float16, device=i) for i in range(n)]
        except RuntimeError:
            break
        dt = timed(lambda: torch.cuda.nccl.all_reduce(bufs), every, 5)
        busbw = size / dt / 1e9 * 2 * (n - 1) / n
        out["allreduce"].append({"bytes": size, "seconds": dt, "busbw_gbps": busbw})
        del bufs
        torch.cuda.empty_cache()
    for i in range(n):
        if left() < 5:
            break
        row, one = {"index": i}, torch.cuda.synchronize
        with torch.cuda.device(i):
            a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=i)
            c = torch.empty_like(a)
            dt = timed(lambda: torch.matmul(a, a, out=c), one, 10)
            row["tflops"], row["finite"] = 2 * 8192 ** 3 / dt / 1e12, bool(torch.isfinite(c).all())
            x = torch.empty(GB, dtype=torch.uint8, device=i)
            y = torch.empty_like(x)
            row["memory_gbps"] = 2 * GB / timed(lambda: y.copy_(x), one, 5) / 1e9
            h = torch.empty(MB256, dtype=torch.uint8).pin_memory()
            d = torch.empty(MB256, dtype=torch.uint8, device=i)
            row["h2d_gbps"] = MB256 / timed(lambda: d.copy_(h, non_blocking=True), one, 5) / 1e9
            row["d2h_gbps"] = MB256 / timed(lambda: h.copy_(d, non_blocking=True), one, 5) / 1e9
            del a, c, x, y, h, d
        torch.cuda.empty_cache()
        out["per_gpu"].append(row)
    for i in range(n):
        for j in range(n):
            if i == j or left() < 2:
                continue
            src = torch.empty(MB256, dtype=torch.uint8, device=i)
            dst = torch.empty(MB256, dtype=torch.uint8, device=j)
            out["p2p"]["%d-%d" % (i, j)] = MB256 / timed(lambda: dst.copy_(src), every, 3) / 1e9
            del src, dst
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("\n" + sys.argv[1] + json.dumps(out) + "\n")
"""


def _nvidia_present(p):
    """An NVIDIA kernel module or an NVIDIA PCI function: only then are NVIDIA calls worth it."""
    if os.path.exists("/proc/driver/nvidia") or os.path.exists("/sys/module/nvidia"):
        return True
    root = "/sys/bus/pci/devices"
    return any(
        (p.read(root + "/" + dev + "/vendor") or "").strip() == NVIDIA_VENDOR
        for dev in p.listdir(root) or []
    )


def collect_nvidia(p):
    """The driver (kernel module, NVML, libcuda) and the GPUs, for the driver and gpus facts."""
    p.read("/proc/driver/nvidia/version")
    p.read("/sys/module/nvidia/version")
    argv = [sys.executable, "-c", NVIDIA_SNIPPET, NVIDIA_MARK]
    if not _nvidia_present(p):
        skipped = _error("absent", "no NVIDIA kernel module and no NVIDIA PCI device")
        p.commands["nvidia"] = dict(argv=[sys.executable, "-c", "<snippet>"], **skipped)
        return
    result = p.run("nvidia", argv)
    if p.spec.get("gpu_tests"):
        budget = GPU_TESTS_SECONDS
        tests = [sys.executable, "-c", GPU_TESTS_SNIPPET, GPU_TESTS_MARK, str(budget)]
        p.run("gpu-tests", tests, timeout=budget + 15.0)  # its own budget, and torch's import
    # The child prints json.dumps output: a non-empty device list reads exactly like this.
    if '"devices": [{' in (result.get("stdout") or ""):
        return
    smi = which("nvidia-smi")  # NVML gave no GPUs: ask nvidia-smi, which needs no pynvml
    if smi:
        # Its full report, health included; the facts read a pasted one the same way.
        p.run("nvidia-smi:xml", [smi, "-q", "-x"])


def _fabric_manager():
    """Pids of nv-fabricmanager (NVSwitch systems need it running before CUDA can start)."""
    return _daemons(_process_table(), ("nv-fabricmanager",))["nv-fabricmanager"]


def collect_nvidia_host(p):
    """The CUDA toolkit's nvcc; the fabric manager where NVIDIA hardware is (Xid events are
    read with the rest of the kernel log: collect_kernel)."""
    nvcc = which("nvcc")
    if nvcc:
        p.run("nvcc", [nvcc, "--version"])
    if not _nvidia_present(p):
        return
    p.value("nvidia:fabricmanager", _fabric_manager)


# -- the kernel log: one reader for every event the checks look for -------------------------
KERNEL_LOG = "kernel:log"
KMSG = "/dev/kmsg"
MAX_KMSG_RECORDS = 1000000  # far above a 16 MiB ring buffer's records; a bound, not a limit
MAX_KERNEL_LINES = 4000  # the latest matching lines that leave the node
JOURNAL_LINES = "100000"
# Which lines leave the node is the controller's to say (the spec's kernel_words: the words of
# doctor/facts/kernel/events.py), so the two never drift; with none, none leave.


def _kernel_matches(text, words):
    """The lines of ``text`` that hold one of ``words`` (lower case: the spec's ``kernel_words``,
    every event doctor/facts/kernel/events.py reads holds one), in order. str.find over the
    lowered text per word: a case-insensitive regex alternation of the words took 50 ms over a
    2,000-line log, this takes 2."""
    lowered = text.lower()
    starts = set()
    for word in words:
        at = lowered.find(word)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            starts.add(start)
            end = lowered.find("\n", at)
            at = lowered.find(word, len(lowered) if end < 0 else end)
    found = []
    for start in sorted(starts):
        end = text.find("\n", start)
        found.append(text[start : len(text) if end < 0 else end])
    return found


def _kmsg_records(since_usec):
    """(usec, text) of every /dev/kmsg record at or after ``since_usec``, oldest first. Each
    read returns one record, "prio,seq,usec,flags;text", its dictionary lines after it."""
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    out, count = [], 0
    try:
        while count < MAX_KMSG_RECORDS:
            try:
                record = os.read(fd, 16384)
            except BlockingIOError:  # EAGAIN: the end of the buffer
                break
            except BrokenPipeError:  # EPIPE: overwritten while we read; the next one follows
                continue
            if not record:
                break
            count += 1
            head, _, body = record.partition(b";")
            fields = head.split(b",")
            try:
                usec = int(fields[2])
            except (IndexError, ValueError):
                continue
            if since_usec is None or usec >= since_usec:
                text = body.split(b"\n", 1)[0].decode("utf-8", "replace")
                out.append((usec, text))
    finally:
        os.close(fd)
    return out, count


def _kernel_from_kmsg(since_usec):
    records, count = _kmsg_records(since_usec)
    # A message with an embedded line end comes escaped ("\x0a"): dmesg prints it as lines.
    text = "\n".join(
        "[%5d.%06d] %s" % (usec // 1000000, usec % 1000000, line)
        for usec, body in records
        for line in body.replace("\\x0a", "\n").split("\n")
    )
    return {"source": KMSG, "read": count, "in_window": len(records)}, text


def _kernel_from_journal(p, since_usec):
    """journalctl -k of this boot (its monotonic stamps, the window applied here)."""
    argv = ["journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-monotonic"]
    entry = p.run(KERNEL_LOG + ":journal", [*argv, "-n", JOURNAL_LINES])
    out = entry.pop("stdout", "")  # only the matching lines are kept, below
    if "rc" not in entry:
        raise LookupError("journalctl -k: %s" % entry["error"]["detail"])
    if entry["rc"] != 0 or not out.strip():
        why = (entry.get("stderr") or "").strip().splitlines()
        raise LookupError(
            "journalctl -k: %s" % (why[-1] if why else "no kernel messages of this boot")
        )
    lines = out.splitlines()
    if since_usec is not None:
        lines = [line for line in lines if _journal_usec(line, since_usec) >= since_usec]
    return {"source": "journalctl -k", "read": len(out.splitlines()), "in_window": len(lines)}, (
        "\n".join(lines)
    )


def _journal_usec(line, default):
    """The monotonic stamp of a short-monotonic line ("[  12.345678] host kernel: ...")."""
    head = line[1 : line.find("]")] if line.startswith("[") else ""
    try:
        return int(float(head.strip()) * 1000000)
    except ValueError:
        return default


def read_kernel_log(p):
    """The kernel log's lines that hold a kernel word, within the window: /dev/kmsg, else the
    journal, else LookupError with why neither could be read (dmesg_restrict, no journal)."""
    since = p.spec.get("since")
    # The printk clock is CLOCK_MONOTONIC's: a wall-clock start maps onto it through now.
    since_usec = None
    if since is not None:
        since_usec = int((float(since) - (time.time() - time.monotonic())) * 1000000)
    try:
        head, text = _kernel_from_kmsg(since_usec)
    except OSError as exc:
        restrict = (p.read("/proc/sys/kernel/dmesg_restrict") or "").strip()
        why = "%s: %s" % (KMSG, exc.strerror or exc)
        if restrict == "1" and isinstance(exc, PermissionError):
            why += " (kernel.dmesg_restrict=1: reading it needs root or CAP_SYSLOG)"
        if not which("journalctl"):
            raise LookupError(why + "; journalctl is not on PATH") from None
        try:
            head, text = _kernel_from_journal(p, since_usec)
        except LookupError as journal:
            raise LookupError("%s; %s" % (why, journal)) from None
    lines = _kernel_matches(text, [w.lower() for w in p.spec.get("kernel_words") or ()])
    head.update(
        since=since,
        since_usec=since_usec,
        matched=len(lines),
        text="\n".join(lines[-MAX_KERNEL_LINES:]),
    )
    return head


def collect_kernel(p):
    p.value(KERNEL_LOG, lambda: read_kernel_log(p))


# -- the host: disk space and mounts (in a child), memory, CPUs, processes, services -----------
HOST_PATHS = "host:paths"
PATH_TIMEOUT = 3.0
# statvfs and access(W_OK) of a path, as one JSON-able answer: run in this process for a path
# on a local filesystem, and in a child for the others (PATHS_SNIPPET), one thread per path.
ANSWER_SOURCE = r"""
def answer(path):
    out = {"path": path}
    try:
        st = os.statvfs(path)
        out.update(frsize=st.f_frsize, blocks=st.f_blocks, bfree=st.f_bfree,
                   bavail=st.f_bavail, files=st.f_files, ffree=st.f_ffree, flag=st.f_flag)
        out["real"] = os.path.realpath(path)
        out["writable"] = os.access(path, os.W_OK)
    except OSError as exc:
        out["error"] = [exc.errno, exc.strerror or str(exc)]
    return out
"""
_answer_namespace = {"os": os}  # type: Dict[str, Any]
exec(ANSWER_SOURCE, _answer_namespace)  # our own constant: one definition, two uses
answer = _answer_namespace["answer"]
# One JSON line per path as it answers. A path on a hung NFS server blocks its thread (and this
# child) in the kernel: the probe stops reading at its deadline, kills the child and leaves it
# if it cannot die yet.
PATHS_SNIPPET = (
    "import json, os, sys, threading\n"
    + ANSWER_SOURCE
    + r"""
lock = threading.Lock()
def one(path):
    out = answer(path)
    with lock:
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
threads = [threading.Thread(target=one, args=(p,)) for p in sys.argv[1:]]
for t in threads:
    t.daemon = True
    t.start()
for t in threads:
    t.join()
"""
)
# Filesystems whose statvfs and access are answered from memory: asked in this process. Any
# other (network, FUSE, unknown) is asked in the child.
LOCAL_FS = (
    "tmpfs", "ramfs", "devtmpfs", "ext2", "ext3", "ext4", "xfs", "btrfs", "overlay", "zfs",
    "f2fs", "vfat", "squashfs", "erofs",
)  # fmt: skip


NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs")
MAX_NETWORK_MOUNTS = 32


def _network_mounts(p):
    """Mount points of network filesystems (and FUSE) in this mount namespace: each is asked
    too, so a hung one is found whether or not anyone named it. autofs triggers are not
    touched (asking would mount them); a user's own FUSE mounts under /run/user are not ours."""
    out = []  # type: List[str]
    for point, kind in _mount_types(p):
        network = kind.split(".")[0] in NETWORK_FS or kind.startswith("fuse.")
        if network and not point.startswith(("/run/user/", "/proc", "/sys")) and point not in out:
            out.append(point)
    return out[:MAX_NETWORK_MOUNTS]


def host_paths(p):
    """The paths whose space and answer are judged: /, /tmp, /dev/shm, $HOME, the asked ones,
    and every network mount; and which of them are network mounts."""
    home = os.path.expanduser("~")
    paths = ["/", "/tmp", "/dev/shm"] + ([home] if home not in ("", "/") else [])
    for path in list(p.spec.get("paths") or []) + list(p.spec.get("mounts") or []):
        if isinstance(path, str) and path.startswith("/") and path not in paths:
            paths.append(path)
    network = [m for m in _network_mounts(p) if m not in paths]
    return paths + network, network


def _mount_types(p):
    """(mount point, filesystem type) of every mount, from this namespace's mountinfo."""
    out = []
    for line in (p.read("/proc/self/mountinfo") or "").splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) >= 5 and rest:
            out.append((fields[4].replace("\\040", " "), rest[0]))
    return out


def _on_local_fs(path, mounts):
    """Whether the mount a path lies on (the last of the longest mount points above it, read
    from the path as written: resolving it could itself hang) is a local filesystem."""
    best, kind = "", None
    for point, fstype in mounts:
        inside = point == "/" or path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind in LOCAL_FS


def ask_paths(paths, network, timeout, mounts):
    """Each path's statvfs/access answer: in this process where its filesystem is local, from
    a child for the others, as many as came within ``timeout``."""
    started = time.monotonic()
    answers = [answer(path) for path in paths if _on_local_fs(path, mounts)]
    remote = [path for path in paths if not _on_local_fs(path, mounts)]
    hung = bool(remote) and _ask_child(remote, timeout, answers)
    return {
        "asked": paths,
        "network": network,
        "answers": list(answers),  # a copy: a hung child's reader may still be running
        "timeout": timeout,
        "hung": hung,
        "seconds": round(time.monotonic() - started, 4),
    }


def _ask_child(paths, timeout, answers):
    """Ask ``paths`` in a child, appending what it answers in time; True when one hung."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", PATHS_SNIPPET, *paths],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def read():
        for raw in proc.stdout or ():
            with contextlib.suppress(ValueError):
                answers.append(json.loads(raw.decode("utf-8", "replace")))

    reader = threading.Thread(target=read)
    reader.daemon = True
    reader.start()
    reader.join(timeout)
    hung = reader.is_alive()
    if hung:
        # SIGKILL ends a wait on NFS or FUSE (both wait killably); a child in a wait that is not
        # killable ends when the server answers, and is not waited for.
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(0.2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(0.2)
    return hung


def _process_table():
    """(pid, comm, state) of every process this user can see, from /proc/<pid>/stat."""
    table = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as handle:
                stat = handle.read(512).decode("utf-8", "replace")
        except OSError:
            continue
        # "pid (comm) S ...": comm may hold spaces and parentheses; the last ")" ends it.
        close = stat.rfind(")")
        if close > 0:
            table.append((int(pid), stat[stat.find("(") + 1 : close], stat[close + 2 : close + 3]))
    return table


def _daemons(table, names):
    """name -> pids of the processes running it (comm keeps 15 characters of a name)."""
    return dict((name, [pid for pid, comm, _ in table if comm == name[:15]]) for name in names)


DAEMONS = (
    "nvidia-persistenced",
    "nv-fabricmanager",
    "nv-hostengine",
    "dockerd",
    "containerd",
    "crio",
    "podman",
    "slurmd",
)


def _stuck(first, wait):
    """The processes in uninterruptible sleep (D) at two looks ``wait`` seconds apart."""
    seen = [(pid, comm) for pid, comm, state in first if state == "D"]
    if not seen:
        return []
    time.sleep(wait)
    again = dict((pid, state) for pid, _, state in _process_table())
    out = []
    for pid, comm in seen:
        if again.get(pid) == "D":
            wchan = ""
            with contextlib.suppress(OSError), open("/proc/%d/wchan" % pid) as handle:
                wchan = handle.read(128).strip()
            out.append({"pid": pid, "comm": comm, "wchan": wchan})
    return out[:200]


def _cpus():
    """CPU models (name -> logical CPUs) and sockets, from /proc/cpuinfo."""
    models = {}  # type: Dict[str, int]
    sockets = set()
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model", "cpu model"):  # x86, arm64, others
                models[value.strip()] = models.get(value.strip(), 0) + 1
            elif key == "physical id":
                sockets.add(value.strip())
    return {"models": models, "sockets": len(sockets) or None}


def _cpufreq(p):
    """The frequency driver and each governor's CPU count; LookupError without cpufreq (a VM,
    a container that hides it)."""
    base = "/sys/devices/system/cpu"
    governors = {}  # type: Dict[str, int]
    for cpu in p.listdir(base) or []:
        if cpu.startswith("cpu") and cpu[3:].isdigit():
            try:
                with open("%s%s/%s/cpufreq/scaling_governor" % (p.root, base, cpu)) as handle:
                    name = handle.read(64).strip()
            except OSError:
                continue
            governors[name] = governors.get(name, 0) + 1
    if not governors:
        raise LookupError("no cpufreq governor in %s/cpu*/cpufreq" % base)
    driver = p.read(base + "/cpu0/cpufreq/scaling_driver")
    return {"driver": (driver or "").strip() or None, "governors": governors}


def _hwmon(p):
    """Every hwmon temperature sensor: chip name, label, input, max and crit (millidegrees)."""
    base = "/sys/class/hwmon"
    for chip in p.listdir(base) or []:
        folder = base + "/" + chip
        p.read(folder + "/name")
        for entry in p.listdir(folder) or []:
            if entry.startswith("temp") and entry.endswith(("_input", "_max", "_crit", "_label")):
                p.read(folder + "/" + entry, limit=256)


def _slurm_node(p, daemons):
    """`scontrol show node` for this node, where SLURM runs it (a job's node, or slurmd here)."""
    scontrol = which("scontrol")
    if not scontrol or not (os.environ.get("SLURM_JOB_ID") or daemons.get("slurmd")):
        return
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    p.run("slurm:node", [scontrol, "--oneliner", "show", "node", name], timeout=3.0)


def collect_host(p):
    for path in ("/proc/meminfo", "/proc/loadavg", "/proc/swaps"):
        p.read(path)
    timeout = float(p.spec.get("path_timeout") or PATH_TIMEOUT)
    paths, network = host_paths(p)
    p.value(HOST_PATHS, lambda: ask_paths(paths, network, timeout, _mount_types(p)))
    p.value("host:cpus", _cpus)
    p.value("host:cpufreq", lambda: _cpufreq(p))
    _hwmon(p)
    try:
        table = _process_table()  # not kept: what runs here is not ours to ship
    except OSError:
        table = []
    daemons = p.value("host:daemons", lambda: _daemons(table, DAEMONS)) or {}
    wait = float(p.spec.get("dstate_seconds") or 0.5)
    p.value("host:dstate", lambda: _stuck(table, wait))
    for tool in ("nvidia-container-cli", "nvidia-ctk", "nvidia-container-runtime"):
        p.value("which:" + tool, lambda t=tool: which(t))
    _slurm_node(p, daemons)


# -- AMD GPUs: amdgpu's sysfs, the KFD topology, ROCm, amd-smi --------------------------------
AMD_VENDOR = "0x1002"
DRM_ROOT = "/sys/class/drm"
KFD_ROOT = "/sys/class/kfd/kfd"
# What amdgpu exposes per GPU under /sys/class/drm/cardN/device (the kernel's amdgpu sysfs docs).
AMD_CARD_ATTRS = (
    "vendor",
    "device",
    "numa_node",
    "current_link_width",
    "max_link_width",
    "current_link_speed",
    "max_link_speed",
    "unique_id",
    "serial_number",
    "product_name",
    "vbios_version",
    "mem_info_vram_total",
)
# RCCL's GPUDirect RDMA probe (src/transport/net_ib.cc ncclIbGdrSupport): the amdkfd peer-memory
# client's version file in one of these places, else ib_register_peer_memory_client in kallsyms.
AMD_PEER_MEMORY = (
    "/sys/kernel/mm/memory_peers/amdkfd/version",
    "/sys/kernel/memory_peers/amdkfd/version",
    "/sys/memory_peers/amdkfd/version",
)
PEER_SYMBOL = "ib_register_peer_memory_client"
# RCCL's DMA-BUF probe (src/misc/rocmwrap.cc) wants both in /boot/config-<release>.
DMABUF_CONFIG = ("CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_PCI_P2PDMA")
AMD_MARK = "@@cluster-doctor-amd@@"
AMD_SMI_TIMEOUT = 10.0
# The slots doctor/facts/amd/text_output.py reads (a pasted output lands in the same ones).
ROCM_SMI = "amd:rocm-smi"
AMD_SMI_TREE = "amd:amd-smi-tree"
AMD_SMI_TOPOLOGY = "amd:amd-smi-topology"
# The amdsmi Python bindings (they load ROCm's libamd_smi.so; without it their import raises
# other errors than ImportError): ECC, bad pages, processes, firmware, link types between GPUs.
AMD_SNIPPET = r"""
import json, sys


def call(fn, *args):
    try:
        value = fn(*args)
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    return {"value": plain(value)}


def plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(getattr(value, "name", None), str) and type(value) not in (str, int, bool):
        return value.name  # enums (IntEnum is an int too): their name says what they are
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


out = {}
try:
    import amdsmi
except Exception as exc:
    out["amdsmi"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
else:
    out["amdsmi"] = {"value": getattr(amdsmi, "__file__", None)}
    out["init"] = call(amdsmi.amdsmi_init)
    if "value" in out["init"]:
        out["lib_version"] = call(amdsmi.amdsmi_get_lib_version)
        handles = call(amdsmi.amdsmi_get_processor_handles)
        hs = []
        if "error" in handles:
            out["handles"] = handles
        else:
            hs = amdsmi.amdsmi_get_processor_handles()
        out["devices"] = []
        for index, h in enumerate(hs):
            out["devices"].append({
                "index": index,
                "bdf": call(amdsmi.amdsmi_get_gpu_device_bdf, h),
                "uuid": call(amdsmi.amdsmi_get_gpu_device_uuid, h),
                "asic": call(amdsmi.amdsmi_get_gpu_asic_info, h),
                "driver": call(amdsmi.amdsmi_get_gpu_driver_info, h),
                "vbios": call(amdsmi.amdsmi_get_gpu_vbios_info, h),
                "firmware": call(amdsmi.amdsmi_get_fw_info, h),
                "ecc": call(amdsmi.amdsmi_get_gpu_total_ecc_count, h),
                "bad_pages": call(amdsmi.amdsmi_get_gpu_bad_page_info, h),
                "processes": call(amdsmi.amdsmi_get_gpu_process_list, h),
            })
        out["links"] = []
        for i in range(len(hs)):
            for j in range(i + 1, len(hs)):
                link = call(amdsmi.amdsmi_topo_get_link_type, hs[i], hs[j])
                out["links"].append({"a": i, "b": j, "link": link})
        call(amdsmi.amdsmi_shut_down)
sys.stdout.write("\n" + sys.argv[1] + json.dumps(out) + "\n")
"""


def rocm_dirs():
    """Where ROCm is installed: $ROCM_PATH, then /opt/rocm (ROCm's installation docs)."""
    out = []
    for folder in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if folder and folder.rstrip("/") not in out:
            out.append(folder.rstrip("/"))
    return out


def _amd_cards(p):
    """The DRM cards whose PCI device is AMD's (connectors like card0-DP-1 are not cards)."""
    cards = []
    for card in p.listdir(DRM_ROOT) or []:
        if card.startswith("card") and card[4:].isdigit():
            device = DRM_ROOT + "/" + card + "/device"
            if (p.read(device + "/vendor") or "").strip() == AMD_VENDOR:
                cards.append(device)
    return cards


def _kfd_topology(p):
    nodes = KFD_ROOT + "/topology/nodes"
    for node in p.listdir(nodes) or []:
        base = nodes + "/" + node
        for name in ("properties", "gpu_id", "name"):
            p.read(base + "/" + name)
        for kind in ("io_links", "p2p_links"):  # p2p_links: the indirect links newer kernels add
            for link in p.listdir(base + "/" + kind) or []:
                p.read(base + "/" + kind + "/" + link + "/properties")
    # Processes with GPU memory: /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> (bytes).
    procs = KFD_ROOT + "/proc"
    for pid in p.listdir(procs) or []:
        for entry in p.listdir(procs + "/" + pid) or []:
            if entry.startswith("vram_"):
                p.read(procs + "/" + pid + "/" + entry)
        p.read("/proc/" + pid + "/comm")


def _lines_with(p, path, words, limit=64):
    """The lines of a (large) file that contain any of ``words``: kallsyms is megabytes."""
    found = []
    with open(p.root + path, "rb") as handle:
        for raw in handle:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if any(w in line for w in words):
                found.append(line)
                if len(found) >= limit:
                    break
    return found


def collect_amd(p):
    """AMD GPUs from sysfs first (amdgpu, KFD), ROCm's version files, then amdsmi if usable."""
    cards = _amd_cards(p)
    p.read("/sys/module/amdgpu/version")
    kfd = p.listdir(KFD_ROOT + "/topology/nodes")
    tools = dict((name, _rocm_tool(name)) for name in ("amd-smi", "rocm-smi"))
    if not cards and kfd is None and not any(tools.values()):
        return
    for device in cards:
        p.readlink(device)  # ../../../0000:c1:00.0: the link's last part is the PCI address
        for attr in AMD_CARD_ATTRS:
            p.read(device + "/" + attr)
        for entry in p.listdir(device + "/ras") or []:
            if entry.endswith("_err_count") or entry in ("features", "gpu_vram_bad_pages"):
                p.read(device + "/ras/" + entry)
        # amdgpu's hwmon: temperatures and their critical limits, millidegrees (edge,
        # junction, mem; Documentation/gpu/amdgpu/thermal.rst).
        for hwmon in p.listdir(device + "/hwmon") or []:
            for sensor in ("temp1", "temp2", "temp3"):
                for what in ("label", "input", "crit"):
                    p.read("%s/hwmon/%s/%s_%s" % (device, hwmon, sensor, what))
        for entry in p.listdir(device + "/fw_version") or []:  # one file per firmware block
            p.read(device + "/fw_version/" + entry)
        p.read(device + "/xgmi_hive_info/xgmi_hive_id")  # one id for every GPU of a hive
    _kfd_topology(p)
    for rocm in rocm_dirs():
        p.read(rocm + "/.info/version")
    p.listdir("/opt")  # side-by-side installs: /opt/rocm-6.2.0, /opt/rocm-6.3.1
    # The host settings RCCL warns about at init (src/init.cc) and its GPUDirect RDMA probes.
    for path in ("/proc/sys/kernel/numa_balancing", "/proc/cmdline"):
        p.read(path)
    p.read("/sys/devices/virtual/dmi/id/bios_version")  # RCCL skips the iommu check on Hyper-V
    for path in AMD_PEER_MEMORY:
        p.read(path)
    p.value("kallsyms:" + PEER_SYMBOL, lambda: _lines_with(p, "/proc/kallsyms", (PEER_SYMBOL,)))
    release = platform.release()
    p.value(
        "kernel-config:" + release,
        lambda: _lines_with(p, "/boot/config-" + release, DMABUF_CONFIG),
    )
    # amdsmi_init walks every GPU: slower than one NVML call, and a wedged driver hangs it. The
    # tools run only where sysfs cannot show the GPUs or their links (a container without
    # /sys/class/kfd), in parallel, each under the same deadline.
    runs = [("amdsmi", [sys.executable, "-c", AMD_SNIPPET, AMD_MARK])]
    if not cards or kfd is None:
        if tools["amd-smi"]:
            runs.append((AMD_SMI_TREE, [tools["amd-smi"], "static"]))
            runs.append((AMD_SMI_TOPOLOGY, [tools["amd-smi"], "topology"]))
        elif tools["rocm-smi"]:
            runs.append((ROCM_SMI, [tools["rocm-smi"], "--showtopo", "--showbus"]))
    timeout = min(AMD_SMI_TIMEOUT, max(1.0, float(p.spec["deadline"]) / 2))
    threads = [
        threading.Thread(target=p.run, args=run, kwargs={"timeout": timeout}) for run in runs
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join()


def _rocm_tool(name):
    """amd-smi or rocm-smi: on PATH, else in ROCm's bin folder."""
    for folder in rocm_dirs():
        if os.access(folder + "/bin/" + name, os.X_OK):
            return which(name) or folder + "/bin/" + name
    return which(name)


def _python_file(p, module, name):
    """Read one file of a package that sits next to this interpreter, without importing it."""
    folder = module_dir(p, module)
    return p.read(os.path.join(folder, name)) if folder else None


def _distribution(p, name):
    """Read a package's metadata headers (version, requirements) next to it, without importing."""

    def find():
        folder = module_dir(p, name)
        if not folder:
            return None
        site = os.path.dirname(folder)
        prefix = name.replace("-", "_").lower() + "-"
        for entry in sorted(os.listdir(site)):
            if entry.lower().startswith(prefix):
                for meta in ("METADATA", "PKG-INFO"):  # .dist-info, .egg-info
                    if entry.endswith((".dist-info", ".egg-info")):
                        path = os.path.join(site, entry, meta)
                        if os.path.isfile(path):
                            return path
        return None

    path = p.value("dist:" + name, find)
    if path:
        p.read(path, limit=DIST_HEADER_BYTES)
    return path


def collect_mpi(p):
    for name in ("mpirun", "mpiexec"):
        path = which(name)
        if path:
            p.value("realpath:" + path, lambda x=path: os.path.realpath(x))
            p.run("mpi:" + name, [path, "--version"])
            break
    else:
        p.commands["mpi:mpirun"] = dict(
            argv=["mpirun", "--version"], **_error("absent", "not on PATH")
        )
    if _python_file(p, "mpi4py", "__init__.py") is not None:
        # The MPI it was built for: mpi.cfg of a source build (mpicc = ...), or the MPI.<abi>.so
        # variants a binary wheel carries.
        _python_file(p, "mpi4py", "mpi.cfg")
        p.listdir(module_dir(p, "mpi4py"))
        _distribution(p, "mpi4py")


TORCH_MARK = "@@cluster-doctor-torch@@"
# Imports torch (seconds) and reports what the running library says, including the libnccl
# actually mapped into the process, which is the one that would run collectives.
TORCH_SNIPPET = r"""
import json, sys, time
started = time.monotonic()
import torch
out = {"import_seconds": round(time.monotonic() - started, 3), "version": torch.__version__,
       "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
       "file": torch.__file__}
try:
    out["cuda_available"] = torch.cuda.is_available()
    if torch.version.cuda or out["hip"]:  # a ROCm build's torch.cuda.nccl is RCCL
        out["nccl"] = list(torch.cuda.nccl.version())
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
try:
    import torch.distributed as dist
    out["distributed"] = {"nccl": dist.is_nccl_available(), "gloo": dist.is_gloo_available(),
                          "mpi": dist.is_mpi_available()}
except Exception as exc:
    out["distributed"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
with open("/proc/self/maps") as maps:
    out["mapped_nccl"] = sorted({l.split()[-1] for l in maps
                                 if ("libnccl" in l or "librccl" in l) and "/" in l})
sys.stdout.write("\n" + sys.argv[1] + json.dumps(out) + "\n")
"""


def collect_frameworks(p):
    if _python_file(p, "torch", "version.py") is not None:
        _distribution(p, "torch")
        if p.spec.get("torch"):
            # Its own deadline: a torch import can take many seconds on a cold cache.
            timeout = max(1.0, float(p.spec["deadline"]) - 2.0)
            p.run("torch", [sys.executable, "-c", TORCH_SNIPPET, TORCH_MARK], timeout=timeout)
    horovod = module_dir(p, "horovod")
    if horovod:
        _distribution(p, "horovod")
        # Which framework extensions were built (horovod/torch/mpi_lib_v2*.so, ...).
        for sub in ("torch", "tensorflow", "mxnet"):
            p.listdir(os.path.join(horovod, sub))
    if _python_file(p, "deepspeed", "git_version_info_installed.py") is not None:
        _distribution(p, "deepspeed")


SECTIONS = [
    ("system", collect_system),
    ("limits", collect_limits),
    ("env", collect_env),
    ("pci", collect_pci),
    ("topo", collect_topo),
    ("net", collect_net),
    ("rdma", collect_rdma),
    ("nccl", collect_nccl),
    ("nvidia", collect_nvidia),
    ("nvidia-host", collect_nvidia_host),
    ("kernel", collect_kernel),
    ("host", collect_host),
    ("amd", collect_amd),
    ("mpi", collect_mpi),
    ("frameworks", collect_frameworks),
    ("extra", collect_extra),
    ("peers", collect_peers),
]


def _run_section(p, name, fn):
    started = time.monotonic()
    try:
        fn(p)
        outcome = {"ok": True}  # type: Dict[str, Any]
    except Exception as exc:
        outcome = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    outcome["seconds"] = round(time.monotonic() - started, 4)
    p.sections[name] = outcome


def collect(spec=None):
    """Run every section under the spec's deadline and return the raw capture as a dict."""
    merged = dict(DEFAULT_SPEC)  # type: Dict[str, Any]
    merged.update(spec or {})
    p = Probe(merged)
    started = time.monotonic()
    threads = []
    for name, fn in SECTIONS:
        thread = threading.Thread(target=_run_section, args=(p, name, fn), name=name)
        thread.daemon = True
        thread.start()
        threads.append((name, thread))
    for name, thread in threads:
        thread.join(max(0.0, merged["deadline"] - (time.monotonic() - started)))
        if thread.is_alive():
            p.sections[name] = {"ok": False, "error": "timeout: section still running at deadline"}
    _run_section(p, "rdma-later", second_sample)
    result = p.to_json()
    result["probe"]["seconds"] = round(time.monotonic() - started, 4)
    result["probe"]["spec"] = merged
    return result


def main(argv):
    spec = json.loads(argv[1]) if len(argv) > 1 else {}
    # One write: json.dump would make thousands under PYTHONUNBUFFERED.
    sys.stdout.write(json.dumps(collect(spec), sort_keys=True))
    sys.stdout.flush()
    # Daemon threads stuck in a kernel read must not keep the process (or the SSH channel) open.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
