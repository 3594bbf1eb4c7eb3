"""A tiny CPU training step for `doctor run` tests: a Gloo allreduce across every rank.

``--fail-rank N``: rank N raises before the collective (the failure the doctor must name).
``--sleep S``: every rank waits S seconds after the allreduce (a job to interrupt).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=20))
rank = dist.get_rank()
if rank == args.fail_rank:
    raise ValueError(f"planted failure on rank {rank}")
value = torch.ones(4) * (rank + 1)
dist.all_reduce(value)
world = dist.get_world_size()
print(f"rank {rank}/{world} on {os.uname().nodename}: sum {value[0].item():g}", flush=True)
time.sleep(args.sleep)
dist.destroy_process_group()
