"""The doctor itself on NCCL hangs of one GPU (run on a machine with an NVIDIA GPU).

    OUT=/some/dir python3 -m tests.gpu.hangs

Two NCCL ranks on the one GPU (each its own NCCL host: tests/hang/job.py --host-per-rank) hang
as each mode of tests/hang/job.py; Flight Recorder is armed as `doctor run` arms it
(doctor/job/watch.py). For each: the stacks agent's raw answer (agent-MODE.json: what the
doctor's parsers read) and `doctor stacks --local -f json` (stacks-MODE.json). Then `doctor run
--local --hang-after 8 --on-hang stop` on torchrun's two ranks of the sleeping mode (run.txt
and its hang-1.json), the GPU tests, and the allreduce on one GPU (not with HANGS_ONLY=1).
All in $OUT/hangs.tar.gz.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from doctor.job.watch import armed_env
from doctor.stages.stacks import Look
from tests.gpu.steps import Steps

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/hangs-out"))
WORK = Path("/tmp/hangs")
PY = sys.executable
JOB = str(ROOT / "tests" / "hang" / "job.py")
STEPS = Steps(WORK)
note, keep = STEPS.note, STEPS.save


def hang(mode: str, port: int) -> None:
    mark = f"gpu{mode}"
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    env.update(armed_env(mark, [__import__("torch").__version__]), NCCL_DEBUG="INFO")
    ranks = []
    for rank in range(2):
        log = (WORK / f"{mode}-rank{rank}.log").open("w")
        argv = [PY, JOB, "--backend", "nccl", "--mode", mode, "--host-per-rank"]
        renv = dict(env, RANK=str(rank), LOCAL_RANK="0")
        ranks.append((subprocess.Popen(argv, env=renv, stdout=log, stderr=log), log))
    began = time.monotonic()
    while time.monotonic() - began < 90:
        text = "".join((WORK / f"{mode}-rank{r}.log").read_text() for r in range(2))
        if text.count("steps done") >= 2 or any(p.poll() is not None for p, _ in ranks):
            break
        time.sleep(1)
    time.sleep(10)
    spec = dict(Look(job=mark, window=2.0, twice=True, deadline=12.0, drop_dumps=True).spec(PY))
    spec.update(ras=True, need_tool=False, tool_bytes=0)
    agent = ROOT / "doctor" / "stages" / "stacks_agent.py"
    keep(f"agent-{mode}.json", [PY, str(agent), json.dumps(spec)], 60)
    keep(f"stacks-{mode}.json", [PY, "-m", "doctor", "stacks", "--local", "-f", "json"], 60)
    keep(f"stacks-{mode}.txt", [PY, "-m", "doctor", "stacks", "--local", "--native"], 90)
    for proc, log in ranks:
        proc.kill()
        proc.wait()
        log.close()


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    OUT.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("HANGS_ONLY"):
        keep("pytest-gpu.txt", [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                                "tests/allreduce/test_gpu.py"], 240, cwd=ROOT)  # fmt: skip
        keep("allreduce.json", [PY, "-m", "doctor", "allreduce", "--local", "-f", "json"], 180)
    for port, mode in enumerate(("sleep", "op", "size", "kill"), start=29650):
        try:
            hang(mode, port)
        except Exception as exc:  # one broken hang must not lose the others
            note(f"{mode}: {type(exc).__name__}: {exc}")
    torchrun = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", JOB, "--backend",
                "nccl", "--mode", "sleep", "--host-per-rank"]  # fmt: skip
    run = [PY, "-m", "doctor", "run", "--local", "--no-allreduce", "--hang-after", "8"]
    run += ["--on-hang", "stop", "--logs", str(WORK / "run"), "--"]
    keep("run.txt", [*run, *torchrun], 240)
    STEPS.write_log("hangs.log")
    with tarfile.open(OUT / "hangs.tar.gz", "w:gz") as tar:
        tar.add(WORK, arcname="hangs")


if __name__ == "__main__":
    main()
