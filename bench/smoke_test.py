"""The peer a user would pick: a torchrun smoke test (one rank per node, Gloo).

Each node runs ``python -m torch.distributed.run --nnodes N --node_rank I --master_addr A
--master_port P bench/smoke_test.py``: init_process_group, one allreduce, a barrier.
"""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
one = torch.ones(1)
dist.all_reduce(one)
assert int(one.item()) == int(os.environ["WORLD_SIZE"]), one
dist.barrier()
dist.destroy_process_group()
