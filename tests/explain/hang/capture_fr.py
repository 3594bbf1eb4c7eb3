"""Make real Flight Recorder dumps of a hung Gloo job and run PyTorch's own analyzer on them.

Run by hand from the repository root: ``python tests/explain/hang/capture_fr.py``. Writes
tests/fixtures/logs/hang/tools/ (README.md there says what each file is):

- ``gloo-MODE/rank_N``: each of three Gloo ranks on loopback dumps its Flight Recorder
  (``torch._C._distributed_c10d._dump_fr_trace``, the pickle torch writes to
  TORCH_FR_DUMP_TEMP_FILE) after three good allreduces and one step where ``skip``: rank 2 calls
  nothing while ranks 0 and 1 allreduce, ``op``: rank 1 broadcasts while ranks 0 and 2
  allreduce. ``gloo-skip/rank_0.json`` is rank 0's ``_dump_fr_trace_json``.
- ``frtrace/gloo-MODE-raw.txt``: ``python -m torch.distributed.flight_recorder.fr_trace`` on
  those dumps as written; ``frtrace/gloo-MODE.txt``: on copies whose ``pg_config`` names the
  default group as the ranks' entries do (torch's Gloo backend records it under an empty name,
  so the analyzer stops at a KeyError without that).
- ``frtrace/h200-MODE.txt``: the same analyzer on the real NCCL dumps of tests/fixtures/gpu/h200
  (``kill``: one dump missing; ``kill-incomplete``: with ``--allow-incomplete-ranks``).
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "fixtures" / "logs" / "hang" / "tools"
H200 = ROOT / "tests" / "fixtures" / "gpu" / "h200"
PY = sys.executable
WORLD = 3

RANK = r"""
import datetime, os, sys, time, torch, torch.distributed as dist
import torch._C._distributed_c10d as c10d
mode, out, rank = sys.argv[1], sys.argv[2], int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
for _ in range(3):
    dist.all_reduce(torch.ones(8))
if mode == "skip" and rank == 2:
    pass  # the rank that never joins the fourth allreduce
elif mode == "op" and rank == 1:
    dist.broadcast(torch.ones(8), src=0, async_op=True)
else:
    dist.all_reduce(torch.ones(8), async_op=True)
time.sleep(2)  # every rank has enqueued what it will
with open(os.path.join(out, "rank_%d" % rank), "wb") as f:
    f.write(c10d._dump_fr_trace())
if mode == "skip" and rank == 0:
    with open(os.path.join(out, "rank_0.json"), "wb") as f:
        f.write(c10d._dump_fr_trace_json())
os._exit(0)  # the pending collectives would hold an orderly exit
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gloo_dumps(mode: str) -> Path:
    out = OUT / f"gloo-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    env.update(WORLD_SIZE=str(WORLD), TORCH_FR_BUFFER_SIZE="2000")
    ranks = [
        subprocess.Popen([PY, "-c", RANK, mode, str(out)], env=dict(env, RANK=str(r)))
        for r in range(WORLD)
    ]
    for proc in ranks:
        proc.wait(timeout=120)
    return out


def analyze(folder: Path, name: str, *flags: str) -> None:
    """PyTorch's analyzer on ``folder``: what it printed (its log goes to stderr), as is."""
    with tempfile.TemporaryDirectory() as tmp:  # the analyzer reads every file of the folder
        for f in folder.glob("rank_*"):
            if f.suffix != ".json":
                shutil.copy(f, tmp)
        for f in folder.glob("fr_*"):
            shutil.copy(f, tmp)
        done = subprocess.run(
            [PY, "-m", "torch.distributed.flight_recorder.fr_trace", *flags, tmp],
            capture_output=True,
            text=True,
            cwd=tmp,
        )
    text = (done.stdout + done.stderr).replace(tmp, "DUMPS")
    (OUT / "frtrace" / f"{name}.txt").write_text(text + f"[exit status {done.returncode}]\n")


def mended(folder: Path) -> Path:
    """Copies of the dumps whose pg_config names the default group as their entries do."""
    copy = Path(tempfile.mkdtemp())
    for f in folder.glob("rank_[0-9]"):
        doc = pickle.loads(f.read_bytes())
        doc["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(3)))}}
        (copy / f.name).write_bytes(pickle.dumps(doc))
    return copy


def main() -> None:
    (OUT / "frtrace").mkdir(parents=True, exist_ok=True)
    for mode in ("skip", "op"):
        dumps = gloo_dumps(mode)
        analyze(dumps, f"gloo-{mode}-raw")
        fixed = mended(dumps)
        analyze(fixed, f"gloo-{mode}")
        shutil.rmtree(fixed)
    for mode in ("sleep", "op", "size", "kill"):
        analyze(H200 / f"hang-{mode}", f"h200-{mode}")
    analyze(H200 / "hang-kill", "h200-kill-incomplete", "--allow-incomplete-ranks")


if __name__ == "__main__":
    main()
