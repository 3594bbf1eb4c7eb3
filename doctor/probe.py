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
from typing import Any, Dict, List  # noqa: F401  (type comments: the nodes may run Python 3.8)

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
        if os.path.exists(device):
            p.value("realpath:" + device, lambda d=device: os.path.realpath(d))
    for hca in p.listdir("/sys/class/infiniband") or []:
        base = "/sys/class/infiniband/" + hca
        p.value("realpath:" + base + "/device", lambda d=base + "/device": os.path.realpath(d))
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
    p.value("nvml:topology", _nvml_topology)


def collect_extra(p):
    """Files and commands that check plugins asked for."""
    for path in p.spec.get("files", []):
        p.read(path)
    for name, argv in sorted(p.spec.get("commands", {}).items()):
        if which(argv[0]) or os.path.isabs(argv[0]):
            p.run("extra:" + name, argv)
        else:
            p.commands["extra:" + name] = dict(argv=list(argv), **_error("absent", "not on PATH"))


SECTIONS = [
    ("system", collect_system),
    ("limits", collect_limits),
    ("env", collect_env),
    ("pci", collect_pci),
    ("topo", collect_topo),
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
