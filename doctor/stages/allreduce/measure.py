"""What an allreduce rank measures, once its process group is up: the exact sum (verify), the
size sweep and each ring link on its own.

Shipped above doctor/stages/allreduce/worker.py, below channel.py (run.py's ``worker_source``):
standard library and torch only, valid on Python 3.8.

The sweep is sized by time: sizes double until the bus bandwidth stops growing or the budget is
spent (``sizes`` forces a list); each ring link then gets about LINK_S seconds' worth at the rate
measured, so a 10 Mbit/s link costs what a fast one does (never too little to tell from noise).
"""

import os
import time

# Shipped, the channel's source runs above this one; imported from the tree otherwise (tests).
if "emit" not in globals():
    from doctor.stages.allreduce.channel import emit


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
