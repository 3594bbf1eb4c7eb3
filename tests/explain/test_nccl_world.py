"""A job's rank count from its launcher's or framework's own line, where no NCCL line gives one
(doctor/facts/nccl/world.py), in `doctor explain` and in a pasted log.

torchrun's lines are real (tests/fixtures/paste/torchrun-job-nccl-bootstrap.log). The others
are written from each framework's source, not captured (none runs here without GPUs or a cluster):
- Ray Train, python/ray/train/torch/config.py: f"Setting up process group for: {init_method}
  [rank={world_rank}, world_size={world_size}]", behind Ray's "(RayTrainWorker pid=N, ip=A) ".
- Lightning, lightning_fabric/utilities/distributed.py _init_dist_connection: f"{'-' * 100}\\n
  distributed_backend={backend}\\nAll distributed processes registered. Starting with
  {world_size} processes\\n{'-' * 100}\\n". Accelerate, state.py: "Num processes: {n}".
- DeepSpeed: launcher/launch.py logger.info(f"dist_world_size={dist_world_size}"); comm/comm.py
  "Discovered MPI settings of world_rank={}, local_rank={}, world_size={}, master_addr={},
  master_port={}"; runtime/config.py's print of its settings ("  {} {} {}", name, dots, value).
  Its logger's prefix: "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] ".
- Megatron-LM, arguments.py: "using world size: {}, data-parallel size: {}, ...".
- PyTorch, ProcessGroupNCCL.cpp (2.2+): "ProcessGroupNCCL initialization options: size: {},
  global rank: {}, TIMEOUT(ms): {}, ..." behind glog's prefix.
The NCCL lines around them are the real ones of tests/fixtures/logs/real/healthy-nccl-*.log.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.facts.nccl.world import world_size
from tests.explain.fixtures import body
from tests.explain.test_nccl_job_log import FOREIGN, NCCL_LINES, pasted
from tests.explain.test_nccl_scarce import read
from tests.paste.pastekit import PASTES

JOB = body(PASTES / "torchrun-job-nccl-bootstrap.log").decode().splitlines()
FRAMEWORK = {
    "torchrun": [line for line in JOB if "world_size" in line],
    "Ray Train": [
        "(RayTrainWorker pid=2231, ip=10.0.3.17) Setting up process group for: env:// [rank=0, "
        "world_size=16]"
    ],
    "Lightning": ["-" * 100, "distributed_backend=nccl",
                  "All distributed processes registered. Starting with 16 processes", "-" * 100],
    "Accelerate": ["Distributed environment: MULTI_GPU  Backend: nccl", "Num processes: 16",
                   "Process index: 0", "Local process index: 0", "Device: cuda:0"],
    "DeepSpeed launcher": ["[2024-06-03 09:12:01,114] [INFO] [launch.py:163:main] "
                           "dist_world_size=16"],
    "DeepSpeed MPI": ["[2024-06-03 09:12:01,114] [INFO] [comm.py:721:mpi_discovery] Discovered "
                      "MPI settings of world_rank=0, local_rank=0, world_size=16, "
                      "master_addr=10.0.3.17, master_port=29500"],
    "DeepSpeed config": ["[2024-06-03 09:12:03,402] [INFO] [config.py:988:print]   world_size "
                         "................... 16"],
    "Megatron-LM": ["using world size: 16, data-parallel size: 8, context-parallel size: 1, "
                    "tensor-model-parallel size: 2, pipeline-model-parallel size: 1"],
    "ProcessGroupNCCL": ["I0603 09:12:04.113206 5012 ProcessGroupNCCL.cpp:905] [PG ID 0 PG GUID 0 "
                         "Rank 0] ProcessGroupNCCL initialization options: size: 16, global rank: "
                         "0, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, PG Name: 0"],
}  # fmt: skip
SIZE = {name: 2 if name == "torchrun" else 16 for name in FRAMEWORK}
# NCCL's own lines that give the rank count ("comm %p rank %d nranks %d", "nRanks %d").
NO_COUNT = [line for line in NCCL_LINES if "nranks" not in line.lower()]


@pytest.mark.parametrize(
    "line",
    [
        "  group_world_size=2",  # torchrun: the agents (nodes), not the ranks
        "  local_world_size=8",
        "LOCAL_WORLD_SIZE=8",
        "dp_world_size=4 mp_world_size=2",
        "Hello world",
        "world_size=0",
        "world_size=99999999999",
    ],
)
def test_sizes_that_are_not_the_job_s(line: str) -> None:
    assert world_size(line) is None


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(sorted(FRAMEWORK)),
    at=st.integers(0, len(NO_COUNT)),
    foreign=st.lists(st.tuples(st.integers(0, len(NO_COUNT)), FOREIGN), max_size=10),
)
def test_the_framework_s_count_where_nccl_gives_none(
    name: str, at: int, foreign: list[tuple[int, str]]
) -> None:
    lines = list(NO_COUNT)
    for where, line in sorted(foreign, key=lambda x: -x[0]):
        lines.insert(where, line)
    lines[at:at] = FRAMEWORK[name]
    text = "\n".join(lines) + "\n"
    assert read(text).nranks() == SIZE[name]
    log = pasted(text).log
    assert log is not None and log["nranks"] == SIZE[name]


@given(name=st.sampled_from(sorted(FRAMEWORK)))
@settings(max_examples=30, deadline=None)
def test_nccl_s_own_count_wins(name: str) -> None:
    text = "\n".join(FRAMEWORK[name] + NCCL_LINES)
    doc = read(text).to_json()
    assert (doc["nranks"], doc["world_size"]) == (2, SIZE[name])
