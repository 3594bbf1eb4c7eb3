"""The allreduce worker: one rank of the doctor's tiny allreduce, run on a node.

Shipped like the probe: the controller runs ``python -c BOOT <nbytes> <spec-json>`` and writes
this file's source on stdin, keeping stdin open afterwards. The first line it writes later is the
word to go, ``{"master_addr": ...}`` (or ``{"abort": ...}``): every rank imports torch while rank 0
says where the rendezvous can listen (``{"ev": "address"}``, before its own import); each says
``{"ev": "ready"}`` once imported. The word comes when every rank is ready: the rendezvous (its
store in rank 0) times the network, never a rank still importing torch. After that stdin is a
lifeline: when it reaches EOF (the controller gave up, was interrupted, or its SSH channel died)
the worker kills its own process group, so no rank is ever left behind on a node. It needs only
the standard library and torch, and must stay valid on Python 3.8.

Every step is reported as one JSON line on stdout, so the controller always knows where each
rank is: ``{"ev": "phase", "phase": ...}`` on entering a phase, ``{"ev": "fail", ...}`` when a
phase fails, and result lines (``verify``, ``sweep``, ``link``). Phases, in order: launch,
rendezvous, init, first_allreduce, verify, sweep, teardown, done.

The sweep is sized by time: sizes double until the bus bandwidth stops growing or the budget is
spent (``sizes`` forces a list); each ring link then gets about LINK_S seconds' worth at the rate
measured, so a 10 Mbit/s link costs what a fast one does (never too little to tell from noise).
"""

import contextlib
import datetime
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import threading
import time

SIOCGIFADDR = 0x8915
STARTED = time.monotonic()
EVENTS = sys.stdout  # the controller's channel; main() moves it off fd 1


def emit(ev, **fields):
    fields["ev"] = ev
    fields["t"] = round(time.monotonic() - STARTED, 6)
    EVENTS.write(json.dumps(fields, sort_keys=True) + "\n")
    EVENTS.flush()


def events_apart():
    """Keep the events on a copy of stdout and point fd 1 at stderr: NCCL writes its INFO lines
    to fd 1 (NCCL_DEBUG_FILE unset), and the controller reads the logs from stderr, where they
    would otherwise be missing (and the event channel strewn with them)."""
    global EVENTS
    EVENTS = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)


def first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0][:500]}"


def own_process_group():
    """Make sure the group we kill on exit holds only this worker (never our parent's group)."""
    # Fails only for a group leader: then the launcher already gave us our own group.
    with contextlib.suppress(OSError):
        os.setsid()


class Word:
    """The controller's word to go (its first line on stdin), once it has come."""

    def __init__(self):
        self.said = threading.Event()
        self.message = {}


def lifeline(word):
    """Take the controller's word, then block until it closes our stdin and take the whole
    group down."""
    try:
        line = sys.stdin.buffer.readline()
        try:
            word.message = json.loads(line) if line else {}
        except ValueError:
            word.message = {"abort": "the controller's word to go is not JSON"}
        word.said.set()
        while sys.stdin.buffer.read(65536):
            pass
    except (OSError, ValueError):
        pass
    os.killpg(os.getpgrp(), signal.SIGKILL)


def iface_address(name):
    """IPv4 address of interface ``name`` (None when it has none)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None
    finally:
        sock.close()


def port_free(port):
    """Whether the rendezvous port can be bound the way TCPStore binds it (all addresses)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("", port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def report_address(where):
    """Rank 0, before importing torch: the address to listen on, and whether the port is free."""
    iface = where.get("iface")
    emit(
        "address",
        host=socket.gethostname(),
        iface=iface,
        addr=iface_address(iface) if iface else None,
        port=where["port"],
        port_free=port_free(where["port"]),
    )


def pattern(torch, rank, elems, device):
    """Integer-valued contributions, distinct per rank and element, exact in float32."""
    index = torch.arange(elems, dtype=torch.int64, device=device)
    return ((index * (rank + 1) + rank) % 251).to(torch.float32)


def verify(torch, dist, spec, device):
    rank, world = spec["rank"], spec["world_size"]
    elems = spec["verify_elems"]
    tensor = pattern(torch, rank, elems, device)
    dist.all_reduce(tensor)
    expected = pattern(torch, 0, elems, device)
    for other in range(1, world):
        expected += pattern(torch, other, elems, device)
    bad = (tensor != expected).nonzero()
    first = int(bad[0][0]) if bad.numel() else None
    emit(
        "verify",
        elems=elems,
        wrong=int(bad.numel()),
        first_bad=first,
        got=None if first is None else float(tensor[first]),
        want=None if first is None else float(expected[first]),
    )
    return bad.numel() == 0


def sync(torch, dist, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# Timed repeats per sweep size stay near this long, and never more than MAX_ITERS.
TARGET_S = 0.1
MAX_ITERS = 10
# The time-sized sweep: powers of two between these, until the bandwidth stops growing (a
# doubling that gains less than PLATEAU, twice in a row) or the budget is spent.
FIRST_SIZE = 4 << 10
LAST_SIZE = 64 << 20
PLATEAU = 1.1
# The link test sends about LINK_S seconds at the measured rate; never less than MIN_LINK_BYTES
# (below it a transfer times latency and scheduling, not the link), never more than MAX.
LINK_S = 0.05
MIN_LINK_BYTES = 256 << 10
MAX_LINK_BYTES = 4 << 20
READY, DATA, ACK = 1, 2, 3  # point-to-point tags of the link test


def first_iterations(size):
    """Before anything is measured: a guess from the size alone (the same on every rank)."""
    return max(1, min(MAX_ITERS, (4 << 20) // max(1, size)))


def doubling():
    size, sizes = FIRST_SIZE, []
    while size <= LAST_SIZE:
        sizes.append(size)
        size *= 2
    return sizes


def sweep(torch, dist, spec, device):
    """Time each size; stop (on every rank at once) when the bandwidth plateaus, or before a size
    would overrun the budget. Returns the bus bandwidth (bytes/s) the ranks agree on at the last
    size: the slowest rank's."""
    budget = spec["sweep_budget_s"]
    # One collective must stay well inside the process group's own timeout.
    longest_op = spec["collective_timeout_s"] / 2.0
    world = spec["world_size"]
    started = time.monotonic()
    forced = spec["sizes"]
    sizes = forced or doubling()
    iters = first_iterations(sizes[0])
    flat, previous, rate = 0, None, None
    for i, size in enumerate(sizes):
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        dist.all_reduce(tensor)  # warm-up: connections and buffers for this size
        sync(torch, dist, device)
        dist.barrier()
        t0 = time.monotonic()
        for _ in range(iters):
            dist.all_reduce(tensor)
        sync(torch, dist, device)
        per_op = (time.monotonic() - t0) / iters
        size = tensor.numel() * 4
        emit("sweep", bytes=size, iters=iters, time_s=per_op)
        # Ranks must stop together: agree on the slowest rank's numbers, then decide.
        agreed = torch.tensor(
            [time.monotonic() - started, per_op], dtype=torch.float64, device=device
        )
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
        spent, slowest_op = float(agreed[0]), float(agreed[1])
        algbw = size / max(slowest_op, 1e-9)
        rate = algbw * 2 * (world - 1) / world
        if i + 1 == len(sizes):
            break
        if not forced:
            flat = flat + 1 if previous is not None and algbw < PLATEAU * previous else 0
            previous = algbw
            if flat >= 2:
                emit("sweep_stopped", after_bytes=size, spent_s=spent, reason="plateau")
                break
        next_op = slowest_op * sizes[i + 1] / float(size)
        iters = max(1, min(MAX_ITERS, int(TARGET_S / max(next_op, 1e-6))))
        if next_op > longest_op or spent + next_op * (iters + 1) > budget:
            emit("sweep_stopped", after_bytes=size, spent_s=spent, reason="budget")
            break
    return rate


def link_bytes(spec, rate):
    """What each link test transfer sends: fixed with forced sizes, else sized by the rate."""
    if spec["link_bytes"]:
        return spec["link_bytes"]
    wanted = int(rate * LINK_S) if rate else MIN_LINK_BYTES
    return max(MIN_LINK_BYTES, min(MAX_LINK_BYTES, wanted))


def ring_links(world):
    """Every directed ring link, both ways, in one order that every rank walks alike."""
    steps = (1,) if world == 2 else (1, -1)
    return [(i, (i + step) % world) for step in steps for i in range(world)]


def cpu_wait():
    """Seconds this process's threads have waited for a CPU (the run-queue delay in
    /proc/<pid>/task/<tid>/schedstat): on a busy machine a short transfer can measure the
    scheduler rather than the link, and this says how much of it did. 0.0 where not kept."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open("/proc/self/task/" + tid + "/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):  # a thread that ended, a kernel without it
            continue
    return total / 1e9


def link_test(torch, dist, spec, device, size):
    """Time each directed ring link on its own, from its sender's clock (no skew between nodes).

    Links go one after another in the same order on every rank, so each pair's blocking
    exchange can never wait on another pair's: the receiver says it is ready, the sender starts
    its clock, sends, and stops it when the receiver's one-element ack arrives.
    """
    rank = spec["rank"]
    elems = max(1, size // 4)
    data = torch.ones(elems, dtype=torch.float32, device=device)
    flag = torch.ones(1, device=device)
    # Twice: the controller keeps each link's best time, so one scheduling hiccup is not a link.
    # Both ends count the time their threads waited for a CPU meanwhile (the receiver sends its
    # share in the ack): the controller does not judge a link on a transfer that mostly waited.
    for src, dst in ring_links(spec["world_size"]) * 2:
        if rank == src:
            dist.recv(flag, dst, tag=READY)
            waited = cpu_wait()
            t0 = time.monotonic()
            dist.send(data, dst, tag=DATA)
            dist.recv(flag, dst, tag=ACK)
            took = time.monotonic() - t0
            waited = cpu_wait() - waited + float(flag[0])
            emit("link", src=src, dst=dst, bytes=elems * 4, time_s=took, waited_s=waited)
        elif rank == dst:
            waited = cpu_wait()
            dist.send(flag, src, tag=READY)
            dist.recv(data, src, tag=DATA)
            ack = torch.tensor([cpu_wait() - waited], dtype=torch.float32, device=device)
            dist.send(ack, src, tag=ACK)


# What NCCL can say beyond its INFO lines, and the first version that can: RAS (2.24) prints its
# own subsystem; NCCL_RUN_DIAGNOSTICS and NCCL_RUN_RAS_DIAGNOSTICS (2.31) check the paths and the
# ranks' configuration at communicator init and print "NCCL DIAG" lines.
RAS_SINCE = (2, 24, 0)
DIAGNOSTICS_SINCE = (2, 31, 0)


def ask_nccl_to_speak(version):
    """Switch on what this NCCL version has (environment, before init); what it lacks is named."""
    on, off = [], []  # type: list[str], list[str]
    text = ".".join(str(v) for v in version) if version else None
    if not version:
        off.append("RAS and diagnostics: torch does not say its NCCL version")
        return {"version": text, "on": on, "off": off}
    if tuple(version) >= RAS_SINCE:
        subsys = os.environ.get("NCCL_DEBUG_SUBSYS", "")
        if subsys and "RAS" not in subsys.split(",") and subsys.upper() != "ALL":
            os.environ["NCCL_DEBUG_SUBSYS"] = subsys + ",RAS"
        on.append("RAS")
    else:
        off.append(f"NCCL {text} has no RAS (2.24+)")
    if tuple(version) >= DIAGNOSTICS_SINCE:
        os.environ.setdefault("NCCL_RUN_DIAGNOSTICS", "1")
        os.environ.setdefault("NCCL_RUN_RAS_DIAGNOSTICS", "1")
        on.append("diagnostics")
    else:
        off.append(f"NCCL {text} has no init-time diagnostics (2.31+)")
    return {"version": text, "on": on, "off": off}


def nccl_version(torch):
    try:
        return tuple(torch.cuda.nccl.version())[:3]
    except Exception:  # a torch without NCCL, or an old one that returns an int
        return None


def run_rank(spec, word):
    rank, world = spec["rank"], spec["world_size"]
    emit(
        "phase",
        phase="launch",
        rank=rank,
        host=socket.gethostname(),
        pid=os.getpid(),
        python=sys.version.split()[0],
        env=dict((k, os.environ[k]) for k in spec["report_env"] if k in os.environ),
    )
    if spec.get("report_address"):
        report_address(spec["report_address"])
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:  # ImportError, or a broken torch install
        emit("fail", phase="launch", error="torch is not importable: " + first_line(exc))
        return 1
    emit("ready")
    if not word.said.wait(spec["go_within_s"]) or "master_addr" not in word.message:
        return 1  # the controller called it off (port taken, no address): it says why
    master_addr = word.message["master_addr"]

    emit("phase", phase="rendezvous", addr=master_addr, port=spec["master_port"])
    try:
        store = dist.TCPStore(
            master_addr,
            spec["master_port"],
            world,
            rank == 0,
            timeout=datetime.timedelta(seconds=spec["rendezvous_timeout_s"]),
            wait_for_workers=False,
        )
    except Exception as exc:
        emit("fail", phase="rendezvous", error=first_line(exc))
        return 1

    voice = ask_nccl_to_speak(nccl_version(torch)) if spec["backend"] == "nccl" else None
    emit("phase", phase="init", backend=spec["backend"], torch=torch.__version__, nccl=voice)
    timeout = datetime.timedelta(seconds=spec["collective_timeout_s"])
    try:
        if spec["backend"] == "nccl":
            device = torch.device("cuda", spec["local_rank"])
            torch.cuda.set_device(device)
            # device_id makes NCCL initialise now, so a bad NIC fails here and not later.
            dist.init_process_group(
                "nccl", store=store, rank=rank, world_size=world, timeout=timeout, device_id=device
            )
        else:
            device = torch.device("cpu")
            dist.init_process_group(
                "gloo", store=store, rank=rank, world_size=world, timeout=timeout
            )
    except Exception as exc:
        emit("fail", phase="init", error=first_line(exc))
        return 1

    phase = "first_allreduce"
    try:
        emit("phase", phase=phase)
        one = torch.ones(1, device=device)
        dist.all_reduce(one)
        if int(one[0]) != world:
            emit("fail", phase=phase, error=f"1-element sum is {one[0].item()}, not {world}")
            return 1
        phase = "verify"
        emit("phase", phase=phase)
        if not verify(torch, dist, spec, device):
            emit("fail", phase=phase, error="allreduce result differs from the exact sum")
            return 1
        phase = "sweep"
        emit("phase", phase=phase)
        if world > 1:
            rate = sweep(torch, dist, spec, device)
            link_test(torch, dist, spec, device, link_bytes(spec, rate))
        phase = "teardown"
        emit("phase", phase=phase)
        dist.destroy_process_group()
    except Exception as exc:
        emit("fail", phase=phase, error=first_line(exc))
        return 1
    emit("phase", phase="done")
    return 0


def main(argv):
    spec = json.loads(argv[-1])
    events_apart()
    own_process_group()
    word = Word()
    threading.Thread(target=lifeline, args=(word,), name="lifeline", daemon=True).start()
    for key, value in spec.get("env", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    # As torchrun does: one OpenMP thread per rank unless set. Ranks sharing CPUs (a node's GPUs,
    # a bed's nodes), each spinning a thread per core, made a 64-rank verify take 61 s, not 1.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return run_rank(spec, word)


if __name__ == "__main__":
    code = main(sys.argv)
    for stream in (EVENTS, sys.stdout, sys.stderr):
        stream.flush()
    # os._exit: a wedged Gloo/NCCL thread must not keep a finished rank alive.
    os._exit(code)
