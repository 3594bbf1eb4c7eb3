"""The stacks agent: on one node, find the job's ranks and say where each one is.

Shipped like the probe (``python -c BOOT <nbytes> <spec-json>``, this source on stdin); a node
with no py-spy gets the controller's after the source, zlib-compressed, run from a memfd (never
written to disk). Standard library only, valid on Python 3.8; one JSON document on stdout.

Within ``deadline`` seconds:
1. The job's processes in this node's network namespace (a namespace test bed's nodes share one
   PID space): the ``pids`` and their descendants, or those with the doctor's job mark in their
   environment, or whose command line matches ``match``, or else every Python process with a
   rank in its environment (RANK, Open MPI's, PMI's, SLURM_PROCID). A Python child of a rank with
   its rank (a DataLoader worker) is that rank's child; a launcher above ranks is dropped.
2. /proc for each (state, wchan, CPU ticks, bytes read and written), and one byte into each
   armed rank's Flight Recorder pipe: torch writes the dump meanwhile, from a thread of its own.
3. Each one's stack (``py-spy dump --json``, all at once; with ``twice``, also at the start of
   the ``window``: a stack that moved is progress), then /proc again at the window's end.
4. The dumps, read as plain values (a pickle naming any global is refused; their bytes are not
   the job's I/O: doctor/facts/hang/flight_dump.py, shipped above this file), and NCCL's RAS
   (NCCL >= 2.24).

It only reads, but for that byte; the dumps the doctor armed (``drop_dumps``) are removed.
"""

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

# Flight Recorder's dump reader, shared with `doctor explain`, and the credential rules, shared
# with the probe: shipped, their source runs above this one (doctor/stages/stacks.py); imported
# from the tree otherwise (tests, a run as a script).
if "read_dump" not in globals():
    if __name__ == "__main__":
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    from doctor.core.secrets import hide_argv
    from doctor.facts.hang.flight_dump import MAX_BYTES, read_dump

RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
KEPT_VARS = (
    *RANK_VARS, "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
    "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
    "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR", "CLUSTER_DOCTOR_JOB",
)  # fmt: skip
PIPE_VARS = ("TORCH_FR_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_DUMP = "/tmp/nccl_trace_rank_"  # torch's default dump stem
MARK = "CLUSTER_DOCTOR_JOB"
PYTHON = re.compile(r"(^|/)(python[0-9.]*|pypy[0-9.]*)$")
RAS_PORT = 28028


MAX_PROC_BYTES = 16 << 20  # a /proc file: a large process's maps are a few MB
MAX_RAS_BYTES = 16 << 20  # NCCL RAS's status of a large job


def read(path, binary=False, limit=MAX_PROC_BYTES):
    """A file's contents (None when it cannot be read, is no regular file or is over ``limit``):
    never a device or a FIFO planted where a file should be, never more than ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = handle.read(limit + 1)
            if len(data) > limit:
                return None
            return data if binary else data.decode()
        except (OSError, UnicodeDecodeError):
            return None


def read_dump_file(path, pid):
    """A Flight Recorder dump's bytes, from a regular file of the rank's own user (or root), not
    through a symlink: ValueError otherwise. Torch's default path is in /tmp, where any user can
    plant one (a link to /dev/zero took the agent's memory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        try:
            owner = os.stat("/proc/%d" % pid).st_uid
        except OSError:
            owner = st.st_uid  # the rank is gone: its file is judged by its kind and size
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid not in (owner, 0):
            raise ValueError("owned by uid %d, not by the rank's user" % st.st_uid)
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError("larger than a dump")
    return data


def own_addresses():
    """This node's IPv4 addresses (the kernel's local routes): how RAS names a node."""
    found, last = set(), ""
    for line in (read("/proc/net/fib_trie") or "").splitlines():
        word = line.strip().split()
        if word and word[0] == "|--":
            last = word[1]
        elif "/32 host LOCAL" in line and not last.startswith("127."):
            found.add(last)
    return sorted(found)


def net_ns(pid):
    with contextlib.suppress(OSError):
        return os.stat("/proc/%s/ns/net" % pid).st_ino
    return None


def environ(pid):
    raw = read("/proc/%d/environ" % pid, binary=True)
    if raw is None:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def stat_fields(pid):
    """(state, ppid, CPU ticks) from /proc/<pid>/stat, or None."""
    text = read("/proc/%d/stat" % pid)
    if not text:
        return None
    rest = text[text.rindex(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[11]) + int(rest[12])


def io_bytes(pid):
    text = read("/proc/%d/io" % pid)
    if text is None:
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return int(fields.get("rchar", 0)) + int(fields.get("wchar", 0))


def sample(pid):
    """How the process stands now (None once it is gone)."""
    found = stat_fields(pid)
    if found is None:
        return None
    state, _, ticks = found
    wchan = read("/proc/%d/wchan" % pid)
    return {"state": state, "cpu_ticks": ticks, "io_bytes": io_bytes(pid), "wchan": wchan or ""}


def rank_source(env):
    for name in RANK_VARS:
        if env.get(name, "").isdigit():
            return name
    return None


def find_processes(spec):
    """The processes to look at: {pid: info}, info holding role 'rank' or 'child'."""
    me = os.getpid()
    own_ns = net_ns(me)
    skip = {me, os.getppid()}
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        pid = int(entry)
        found = stat_fields(pid)
        if found is None or found[0] == "Z":
            continue
        if own_ns is not None and net_ns(pid) not in (own_ns, None):
            continue
        raw = read("/proc/%d/cmdline" % pid, binary=True) or b""
        argv = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
        if not argv or any("doctor-stacks" in word for word in argv[:3]):
            continue
        table[pid] = {"pid": pid, "ppid": found[1], "argv": argv}
    pids = set(spec.get("pids") or ())
    match = re.compile(spec["match"]) if spec.get("match") else None
    mark = spec.get("job") or ""
    chosen, hidden = {}, 0
    for pid, info in table.items():
        env = environ(pid)
        info["env"] = {
            k: v for k, v in (env or {}).items() if k in KEPT_VARS or k in PIPE_VARS + DUMP_VARS
        }
        info["python"] = is_python(pid, info["argv"])
        if env is None and info["python"]:
            hidden += 1  # another user's: neither its rank nor its stack can be read
        if pids:
            wanted = pid in pids or any(a in pids for a in ancestors(pid, table))
        elif mark:
            wanted = (env or {}).get(MARK) == mark and info["python"]
        elif match is not None:
            wanted = bool(match.search(" ".join(info["argv"])))
        else:
            wanted = info["python"] and rank_source(env or {}) is not None
        if wanted:
            chosen[pid] = info
    return roles(chosen, table), hidden


def is_python(pid, argv):
    try:
        exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        exe = ""
    return bool(PYTHON.search(os.path.basename(argv[0])) or PYTHON.search(exe))


def ancestors(pid, table):
    seen = []
    while pid in table and table[pid]["ppid"] not in seen:
        pid = table[pid]["ppid"]
        seen.append(pid)
    return seen


def roles(chosen, table):
    """A chosen process below a chosen rank of the same rank is that rank's child; one above
    ranks (a launcher: torchrun's agent, a shell) is dropped when a rank below it is chosen."""
    for pid, info in chosen.items():
        above = [a for a in ancestors(pid, table) if a in chosen]
        info["role"] = "rank"
        if above and rank_of(chosen[above[0]])[0] and rank_of(chosen[above[0]]) == rank_of(info):
            info["role"], info["of"] = "child", above[0]
    launchers = {
        a
        for pid, info in chosen.items()
        for a in ancestors(pid, table)
        if a in chosen and info["role"] == "rank" and rank_of(info)[0] > rank_of(chosen[a])[0]
    }
    return {pid: info for pid, info in chosen.items() if pid not in launchers}


def rank_of(info):
    """(how sure: RANK above the launcher-wide ones, 0 for none; the rank)."""
    source = rank_source(info["env"])
    return (len(RANK_VARS) - RANK_VARS.index(source), info["env"][source]) if source else (0, None)


def find_tool(spec):
    for path in spec.get("pyspy") or ():
        if path and os.access(path, os.X_OK):
            return path
    return shutil.which("py-spy")


def shipped_tool(data):
    """The shipped py-spy: in a memfd (exec'd through /proc, never on disk), else a private file."""
    binary = zlib.decompress(data)
    try:
        fd = os.memfd_create("py-spy", 0)
        os.write(fd, binary)
        return "/proc/%d/fd/%d" % (os.getpid(), fd), None
    except (AttributeError, OSError):
        import tempfile

        folder = tempfile.mkdtemp(prefix="doctor-stacks-")
        path = os.path.join(folder, "py-spy")
        with open(path, "wb") as handle:
            handle.write(binary)
        os.chmod(path, 0o700)
        return path, folder


def dump(tool, pid, native, until):
    """One process's threads as py-spy sees them, or the reason there are none."""
    argv = [tool, "dump", "--pid", str(pid), "--json"] + (["--native"] if native else [])
    try:
        out = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=max(1.0, until - now())
        )
    except subprocess.TimeoutExpired:
        return {"error": "py-spy did not answer in time"}
    except OSError as exc:
        return {"error": "cannot run py-spy: %s" % exc.strerror}
    if out.returncode != 0:
        lines = out.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"error": (lines[-1] if lines else "py-spy exit %d" % out.returncode)[:300]}
    try:
        return {"threads": json.loads(out.stdout.decode("utf-8", "replace"))}
    except ValueError:
        return {"error": "py-spy's answer is not JSON"}


def dump_all(tool, pids, native, until):
    """Every process's dump at once (each py-spy pauses its process only for its own read)."""
    if not pids:
        return {}
    with ThreadPoolExecutor(max_workers=len(pids)) as pool:
        running = {pid: pool.submit(dump, tool, pid, native, until) for pid in pids}
        return {pid: job.result() for pid, job in running.items()}


def in_root(pid, path):
    """The path as the process sees it (its mount namespace: a container's /tmp)."""
    try:
        same = os.stat("/proc/%d/root" % pid).st_ino == os.stat("/").st_ino
    except OSError:
        same = True
    return path if same else "/proc/%d/root%s" % (pid, path)


def ask_dumps(procs, drop):
    """One byte into each armed rank's Flight Recorder pipe: {pid: (dump, mtime before, drop)}."""
    asked = {}  # type: dict
    for pid, info in procs.items():
        env, rank = info["env"], info["env"].get("RANK")
        stem = next((env[v] for v in PIPE_VARS if env.get(v)), None)
        if info["role"] != "rank" or rank is None:
            continue
        target = in_root(pid, next((env[v] for v in DUMP_VARS if env.get(v)), DEFAULT_DUMP) + rank)
        before = os.stat(target).st_mtime if os.path.exists(target) else None
        if stem is None:
            if before is not None:  # written on a watchdog timeout, before we came
                asked[pid] = (target, None, False)
            else:
                info["fr"] = {"error": "not armed: no TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}
            continue
        pipe = in_root(pid, stem + rank + ".pipe")
        try:
            if not stat.S_ISFIFO(os.stat(pipe).st_mode):
                raise OSError("not a FIFO")
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"1")
            os.close(fd)
        except OSError as exc:
            info["fr"] = {"error": "dump pipe %s: %s" % (pipe, exc.strerror or exc)}
            continue
        asked[pid] = (target, before, drop)
    return asked


def read_dumps(procs, asked, until):
    """The dumps asked for, as each is written whole (its size steady), until ``until``."""
    sizes = {}  # type: dict
    while asked and now() < until:
        for pid, (target, before, _) in list(asked.items()):
            try:
                st = os.stat(target)
            except OSError:
                continue
            if (before is None or st.st_mtime > before) and sizes.get(pid) == st.st_size > 0:
                procs[pid]["fr_written"] = st.st_size, st.st_mtime
                finish(procs[pid], asked.pop(pid))
            sizes[pid] = st.st_size
        time.sleep(0.1)
    for pid, (target, before, _) in asked.items():
        if before is not None and os.path.exists(target):
            finish(procs[pid], (target, before, False), stale=True)
        else:
            procs[pid]["fr"] = {"error": "no dump in time"}


def finish(info, asked, stale=False):
    target, _, drop = asked
    try:
        info["fr"] = read_dump(read_dump_file(target, info["pid"]))
    except ValueError as exc:  # a truncated or foreign file must not cost the other ranks
        info["fr"] = {"error": "unreadable dump %s: %s" % (target, exc)}
    info["fr"]["stale"] = stale
    if drop:
        with contextlib.suppress(OSError):
            os.unlink(target)


def maps_nccl(pid):
    text = read("/proc/%d/maps" % pid) or ""
    return "libnccl" in text or "librccl" in text


def ras_status(address, until):
    """NCCL's RAS client protocol (NCCL's src/ras/client.cc): JSON where NCCL offers it."""
    host, _, port = address.rpartition(":")
    try:
        conn = socket.create_connection((host or "127.0.0.1", int(port)), timeout=3)
    except (OSError, ValueError) as exc:
        return {"error": "RAS at %s: %s" % (address, getattr(exc, "strerror", None) or exc)}
    with conn:
        conn.settimeout(max(1.0, until - now()))
        reader = conn.makefile("rb")
        try:
            conn.sendall(b"CLIENT PROTOCOL 2\n")
            server = reader.readline().decode("utf-8", "replace").strip()
            conn.sendall(b"SET FORMAT json\n")
            form = "json" if reader.readline().strip().upper() == b"OK" else "text"
            conn.sendall(b"STATUS\n")
            body = reader.read(MAX_RAS_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            return {"error": "RAS at %s: %s" % (address, exc)}
    return {"address": address, "server": server, "format": form, "body": body}


def now():
    return time.monotonic()


def main(spec):
    began = now()
    until = began + float(spec.get("deadline", 10))
    out = {"node": socket.gethostname(), "machine": os.uname().machine}  # type: dict
    out["addresses"] = own_addresses()
    tool = find_tool(spec)
    folder = None
    if tool is None and spec.get("tool_bytes"):
        tool, folder = shipped_tool(sys.stdin.buffer.read(int(spec["tool_bytes"])))
        out["tool"] = {"how": "shipped"}
    elif tool is not None:
        out["tool"] = {"how": "node", "path": tool}
    else:
        out["tool"] = {"how": "missing"}
        if spec.get("need_tool"):
            return out
    procs, out["hidden"] = find_processes(spec)
    first = {pid: sample(pid) for pid in procs}
    asked = ask_dumps(procs, bool(spec.get("drop_dumps")))
    native = bool(spec.get("native"))
    stacks_first = dump_all(tool, list(procs), native, until) if tool and spec.get("twice") else {}
    if stacks_first:
        time.sleep(max(0.0, min(began + float(spec.get("window", 0)), until) - now()))
    stacks = dump_all(tool, list(procs), native, until) if tool else {}
    time.sleep(max(0.0, min(began + float(spec.get("window", 0)), until) - now()))
    last = {pid: sample(pid) for pid in procs}
    elapsed, sampled = round(now() - began, 3), time.time()
    read_dumps(procs, asked, until - 1)
    for pid, info in procs.items():
        size, written = info.pop("fr_written", (0, 0))
        seen = last[pid]
        if written and written <= sampled and seen and seen["io_bytes"] is not None:
            seen["io_bytes"] -= size  # torch writing its dump is not the job's I/O
    nccl = {pid: maps_nccl(pid) for pid in procs}  # each process's maps read once
    if spec.get("ras"):
        addresses = {
            info["env"].get("NCCL_RAS_ADDR") or "127.0.0.1:%d" % RAS_PORT
            for pid, info in procs.items()
            if info["env"].get("NCCL_RAS_ENABLE", "1") != "0" and nccl[pid]
        }
        if addresses:
            out["ras"] = ras_status(sorted(addresses)[0], until)
    for pid, info in procs.items():
        info["first"], info["second"], info["seconds"] = first[pid], last[pid], elapsed
        if pid in stacks:
            info["stack"] = stacks[pid]
        if pid in stacks_first:
            info["stack_first"] = stacks_first[pid]
        info["nccl"] = nccl[pid]
        info["argv"] = hide_argv(info["argv"])  # a job's --hf-token stays on the node
    out["processes"] = sorted(procs.values(), key=lambda i: i["pid"])
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    return out


if __name__ == "__main__":
    answer = main(json.loads(sys.argv[-1]))
    sys.stdout.write(json.dumps(answer, sort_keys=True) + "\n")
    sys.stdout.flush()
    os._exit(0)  # a py-spy still running past the deadline must not hold the node's answer
