"""The allreduce worker: one rank of the doctor's tiny allreduce, run on a node.

Shipped like the probe: the controller runs ``python -c BOOT <nbytes> <spec-json>`` and writes
the worker's source on stdin (channel.py, measure.py, then this file: run.py's
``worker_source``), keeping stdin open afterwards. The first line it writes later is the word to
go, ``{"master_addr": ...}`` (or ``{"abort": ...}``): every rank imports torch while rank 0 says
where the rendezvous can listen (``{"ev": "address"}``, before its own import); each says
``{"ev": "ready"}`` once imported. The word comes when every rank is ready: the rendezvous (its
store in rank 0) times the network, never a rank still importing torch. After that stdin is a
lifeline, and from its first moment the rank beats (channel.py). It needs only the standard
library and torch, and must stay valid on Python 3.8.

Every step is reported as one JSON line on the event channel: ``{"ev": "phase", "phase": ...}``
on entering a phase, ``{"ev": "fail", ...}`` when a phase fails, and result lines (``verify``,
``sweep``, ``link``: measure.py). Phases, in order: launch, rendezvous, init, first_allreduce,
verify, sweep, teardown, done.
"""

import datetime
import fcntl
import json
import os
import socket
import struct
import sys
import threading

# Shipped, the sources above this one define these; imported from the tree otherwise (tests).
if "emit" not in globals():
    from doctor.stages.allreduce.channel import (
        Word,
        emit,
        events_apart,
        finish,
        lifeline,
        own_process_group,
        start_pulse,
    )
    from doctor.stages.allreduce.measure import link_bytes, link_test, sweep, verify

SIOCGIFADDR = 0x8915


def first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0][:500]}"


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
    start_pulse(spec["beat_s"])  # before any thread: it forks
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
    finish(main(sys.argv))
