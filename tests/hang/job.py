"""A small training job that hangs on purpose, one shape per ``--mode``, for the hang tests.

Every rank runs ``--steps`` good allreduces, then rank ``--rank`` misbehaves:

  sleep   it sleeps (a breakpoint, a slow checkpoint) while the others wait in the allreduce
  fifo    its DataLoader worker blocks opening ``--fifo`` (a FIFO nobody writes) for reading
  op      it broadcasts while the others allreduce (a mismatched collective)
  size    it allreduces twice as many elements as the others
  kill    its process is killed (SIGKILL) while the others wait in the allreduce
  vanish  its process is killed (SIGKILL) before it joins the process group
  slow    no one misbehaves: every step computes ``--step-seconds`` on the CPU, then allreduces
          1 MB, and a line is printed every ``--print-every`` steps only (slow, but progressing)
  none    the good steps, then exit

Gloo on CPU, or NCCL when ``--backend nccl`` (each rank on cuda:LOCAL_RANK modulo the GPUs; the
result is read back with ``.item()`` so the host waits on the collective as training does).
The process group's timeout is long, so a hang stays a hang for the test's whole length.
"""

import argparse
import datetime
import os
import signal
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="none")
parser.add_argument("--rank", type=int, default=1)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--backend", default="gloo")
parser.add_argument("--fifo", default="")
parser.add_argument("--step-seconds", type=float, default=1.0)
parser.add_argument("--print-every", type=int, default=1000)
parser.add_argument("--seconds", type=float, default=30.0, help="how long 'slow' runs")
parser.add_argument(
    "--host-per-rank",
    action="store_true",
    help="each rank an NCCL host of its own (NCCL_HOSTID, NET/Socket): two ranks on one GPU",
)
parser.add_argument(
    "--ddp_timeout",
    type=float,
    default=900.0,
    help="the process group's timeout in seconds (Hugging Face Trainer's option's name)",
)
args = parser.parse_args()
if args.host_per_rank:  # technical-notes §8.2: NCCL refuses two ranks on one GPU of one host
    os.environ.update(NCCL_HOSTID=f"rank{os.environ['RANK']}", NCCL_NET="Socket")

if args.mode == "vanish" and int(os.environ["RANK"]) == args.rank:
    os.kill(os.getpid(), signal.SIGKILL)
dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.ddp_timeout))
rank = dist.get_rank()
device = torch.device("cpu")
if args.backend == "nccl":
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
odd = rank == args.rank


def allreduce(n=1024):
    x = torch.ones(n, device=device)
    dist.all_reduce(x)
    return x.sum().item()


class Blocked(torch.utils.data.Dataset):
    """Its one item is read from a FIFO that no one writes: open() blocks in the worker."""

    def __len__(self):
        return 1

    def __getitem__(self, i):
        with open(args.fifo, "rb") as f:
            return torch.tensor(list(f.read(4)))


for _ in range(args.steps):
    allreduce()
print(f"rank {rank}: {args.steps} steps done, mode {args.mode}", flush=True)

if args.mode == "sleep":
    if odd:
        time.sleep(3600)
    allreduce()
elif args.mode == "fifo":
    if odd:
        for _batch in torch.utils.data.DataLoader(Blocked(), num_workers=1):
            pass
    allreduce()
elif args.mode == "op":
    if odd:
        x = torch.ones(1024, device=device)
        dist.broadcast(x, src=0)
        x.sum().item()
    else:
        allreduce()
elif args.mode == "size":
    allreduce(2048 if odd else 1024)
elif args.mode == "kill":
    if odd:
        os.kill(os.getpid(), signal.SIGKILL)
    allreduce()
elif args.mode == "slow":
    began, step = time.monotonic(), 0
    a = torch.rand(256, 256)
    while time.monotonic() - began < args.seconds:
        until = time.monotonic() + args.step_seconds
        while time.monotonic() < until:
            a = (a @ a).clamp(-1, 1)
        allreduce(1 << 18)  # a 1 MB gradient
        step += 1
        if step % args.print_every == 0:
            print(f"rank {rank}: step {step}", flush=True)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
