"""How many ranks a job has, as its launcher or framework says, for a log where no NCCL line
("comm %p rank %d nranks %d") gives it. Each shape as the framework's source prints it:

- Ray Train (python/ray/train/torch/config.py, _setup_torch_process_group): "Setting up process
  group for: %s [rank=%d, world_size=%d]", rank 0's at INFO in Train v1 and v2.
- torchrun (torch/distributed/elastic/agent/server/api.py, _rendezvous): the lines of "Rendezvous
  complete for workers. Result:", among them "  global_world_sizes=[16, 16, ...]" (not
  "group_world_size", the count of nodes).
- DeepSpeed: launcher/launch.py "dist_world_size=%d"; comm/comm.py "Discovered MPI settings of
  world_rank=%s, local_rank=%s, world_size=%s, ..."; runtime/config.py's dump of its settings,
  "  world_size .......... 16". Megatron-LM: "using world size: 16, data-parallel size: ...".
- Lightning (lightning_fabric/utilities/distributed.py, _init_dist_connection): "All distributed
  processes registered. Starting with %d processes". Accelerate (state.py, PartialState's repr):
  "Num processes: %d".
- PyTorch's ProcessGroupNCCL (ProcessGroupNCCL.cpp, 2.2+): "ProcessGroupNCCL initialization
  options: size: %d, global rank: %d, ..." (a subgroup's size too: the largest is the world's).

A per-node or per-group size (local_world_size, group_world_size, dp_world_size) is not the job's:
the name must start at "world". Only lines holding a KEYWORDS entry reach the reader in `doctor
explain` (the sieve), so every shape holds one.
"""

from __future__ import annotations

import re

# Literal text each line read here holds (nccl_lines.KEYWORDS takes them in).
KEYWORDS = (
    "world",
    "processes registered",
    "Num processes",
    "ProcessGroupNCCL initialization options",
)
WORLD = re.compile(
    r"\b(?:dist_|global_)?world[ _]sizes?\b(?:\s*(?:=|:|\.{2,}|is)\s*|\s+)\[?['\"]?(?P<n>\d+)"
    r"|\bprocesses registered\. Starting with (?P<lightning>\d+) processes"
    r"|^Num processes: (?P<accelerate>\d+)"
    r"|\bProcessGroupNCCL initialization options: size: (?P<pg>\d+)"
)
MAX_RANKS = 1 << 24  # more is a number that is not a rank count (an id, a byte count)


def world_size(text: str) -> int | None:
    """The job's size one line gives, or None."""
    if "orld" not in text and "rocesses" not in text and "options: size" not in text:
        return None  # most lines: no regex at all
    m = WORLD.search(text)
    if m is None:
        return None
    n = int(next(g for g in m.groups() if g is not None))
    return n if 0 < n <= MAX_RANKS else None
