"""The probe: reads one node and prints its raw captures as one JSON document.

This file is shipped to nodes by piping its source into ``python3 -``, so it must run on the
oldest Python a node may have (3.8) with the standard library only; psutil and pynvml are used
when importable and never required. It only reads: it never writes a file, changes a setting or
leaves a process behind (every command runs in its own process group, killed whole on timeout).

It captures raw data (file contents, command results, values read in-process) and judges
nothing: the controller parses. That keeps every capture from a real machine usable as a test
fixture and a support bundle.

Usage: ``python3 probe.py [SPEC_JSON]`` or ``python3 - [SPEC_JSON] < probe.py``.
"""

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
from typing import Any, Dict  # noqa: F401  (type comments: the nodes may run Python 3.8)

PROBE_VERSION = 1
MAX_FILE_BYTES = 1 << 20
MAX_OUTPUT_BYTES = 4 << 20
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
    "NVIDIA_",
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
SECRET_MARKERS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
    "API_KEY",
    "AUTH",
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
        self.files = {}
        self.dirs = {}
        self.links = {}
        self.commands = {}
        self.values = {}
        self.sections = {}
        self._lock = threading.Lock()

    # -- readers -------------------------------------------------------------------------
    def read(self, path, limit=MAX_FILE_BYTES):
        """Read a text file once; returns its text or None (the reason is recorded)."""
        if path in self.files:
            return self.files[path].get("text")
        try:
            with open(path, "rb") as handle:
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
            entry = {"entries": sorted(os.listdir(path))}
        except OSError as exc:
            entry = _os_error(exc)
        with self._lock:
            self.dirs[path] = entry
        return entry.get("entries")

    def readlink(self, path):
        if path in self.links:
            return self.links[path].get("target")
        try:
            entry = {"target": os.readlink(path)}
        except OSError as exc:
            entry = _os_error(exc)
        with self._lock:
            self.links[path] = entry
        return entry.get("target")

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
    p.value("uname", lambda: list(platform.uname()))
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
        env = {}
        for key, val in os.environ.items():
            if not key.startswith(ENV_PREFIXES):
                continue
            secret = any(marker in key.upper() for marker in SECRET_MARKERS)
            env[key] = "<redacted>" if secret else val
        return env

    p.value("env", captured)


def collect_pci(p):
    """Every PCI device's identity, place in the tree and NUMA node (GPUs, NICs, HCAs, bridges)."""
    root = "/sys/bus/pci/devices"
    for dev in p.listdir(root) or []:
        path = root + "/" + dev
        for attr in ("class", "vendor", "device", "numa_node", "local_cpulist"):
            p.read(path + "/" + attr)
        p.readlink(path + "/driver")
        # The resolved path (…/pci0000:00/0000:00:01.0/0000:01:00.0) gives the bridge chain
        # that GPU-NIC distances are computed from, the way NCCL's topology code does.
        p.value("realpath:" + path, lambda d=path: os.path.realpath(d))


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
    import ctypes.util

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
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
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


def collect_rdma(p):
    """RDMA devices from sysfs (no ibstat), the verbs device nodes, GPUDirect RDMA modules."""
    for hca in p.listdir(IB_ROOT) or []:
        base = IB_ROOT + "/" + hca
        for attr in ("node_type", "fw_ver", "hca_type", "board_id"):
            p.read(base + "/" + attr)
        p.readlink(base + "/device")
        p.listdir(base + "/device/net")
        for port in p.listdir(base + "/ports") or []:
            pbase = base + "/ports/" + port
            for attr in ("state", "phys_state", "rate", "link_layer"):
                p.read(pbase + "/" + attr)
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

    def verbs():
        import ctypes

        ctypes.CDLL("libibverbs.so.1")
        return True

    p.value("load:libibverbs.so.1", verbs)


def collect_extra(p):
    """Files and commands that check plugins asked for."""
    for path in p.spec.get("files", []):
        p.read(path)
    for name, argv in sorted(p.spec.get("commands", {}).items()):
        if which(argv[0]) or os.path.isabs(argv[0]):
            p.run("extra:" + name, argv)
        else:
            p.commands["extra:" + name] = dict(argv=list(argv), **_error("absent", "not on PATH"))


# -- node facts: NCCL, driver, GPUs, MPI, frameworks ---------------------------------------
# Library calls (libnccl, libcuda, NVML) run in a child interpreter: a library that crashes or
# hangs takes only that child with it, and the child is killed at its deadline.

NCCL_MARK = "@@cluster-doctor-nccl@@"
NCCL_LOG_ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET",
}
NCCL_CALL_TIMEOUT = 4.0
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
        found = re.compile(rb"NCCL version \d+\.\d+\.\d+[^\x00\s]*").search(m, 0, 64 << 20)
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


def _parallel(jobs):
    """Run independent callables at once (each records its own result) and wait for all."""
    threads = [threading.Thread(target=job) for job in jobs]
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join()


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
    ldconfig = _ldconfig(p)
    found = []
    for line in (ldconfig.get("stdout") or "").splitlines():
        name, _, target = line.strip().partition(" => ")
        if name.startswith(("libnccl.so", "libnccl-net")) and target:
            found.append(target.strip())
    for folder in nccl_lib_dirs(p):
        for entry in p.listdir(folder) or []:
            if entry.startswith("libnccl.so"):
                found.append(os.path.join(folder, entry))
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
    real = {}  # type: Dict[str, str]
    for path in found:
        if os.path.basename(path).startswith("libnccl.so"):
            real.setdefault(p.value("realpath:" + path, lambda x=path: os.path.realpath(x)), path)
    _parallel(
        [
            lambda r=r: p.run(
                "nccl:" + r,
                [sys.executable, "-I", "-S", "-c", NCCL_SNIPPET, r, NCCL_MARK],
                timeout=NCCL_CALL_TIMEOUT,
                env=env,
            )
            for r in sorted(real)
        ]
    )


SECTIONS = [
    ("system", collect_system),
    ("limits", collect_limits),
    ("env", collect_env),
    ("pci", collect_pci),
    ("net", collect_net),
    ("rdma", collect_rdma),
    ("nccl", collect_nccl),
    ("extra", collect_extra),
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
    result = p.to_json()
    result["probe"]["seconds"] = round(time.monotonic() - started, 4)
    result["probe"]["spec"] = merged
    return result


def main(argv):
    spec = json.loads(argv[1]) if len(argv) > 1 else {}
    json.dump(collect(spec), sys.stdout, sort_keys=True)
    sys.stdout.flush()
    # Daemon threads stuck in a kernel read must not keep the process (or the SSH channel) open.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
