"""Capture a GPU node's real outputs for the fixtures (run on a machine with an NVIDIA GPU).

    OUT=/some/dir python3 -m tests.gpu.capture

Everything lands in $OUT/capture.tar.gz (the device tool brings back few files): nvidia-smi's
three views, the doctor's probe, preflight and allreduce on the node, its allreduce across two
NCCL hosts of the one GPU (tests/gpu/two_hosts.py), the GPU tests, and four
hangs of two NCCL ranks on the one GPU (distinct NCCL_HOSTID, NCCL_NET=Socket: two "hosts",
technical-notes §8.2) made by tests/hang/job.py — one rank sleeping, a mismatched op, different
sizes, a killed rank — each with what NCCL's RAS, PyTorch's Flight Recorder (armed through the
environment, dumped through its pipe) and py-spy said while it hung; then three torchrun jobs of
four such ranks left to end by the watchdog's timeout (what a job leaves after its hang). Each step
has a deadline and a failed step is logged, not fatal. The tests read what is committed from it
(tests/fixtures/gpu).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from doctor.core.jsonable import jsonable
from tests.gpu.steps import Steps
from tests.gpu.two_hosts import run_two_hosts

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/capture-out"))
WORK = Path("/tmp/capture")
PY = sys.executable
JOB = str(ROOT / "tests" / "hang" / "job.py")
PYSPY = shutil.which("py-spy") or "/tmp/site/bin/py-spy"
STEPS = Steps(WORK)
note, save = STEPS.note, STEPS.save


def ras(request: list[str], timeout: float = 20) -> str:
    """NCCL's RAS text protocol on localhost:28028 (src/ras/client.cc): handshake, then ask."""
    try:
        with socket.create_connection(("127.0.0.1", 28028), timeout=timeout) as s:
            f = s.makefile("rwb")
            answers = []
            for line in ["CLIENT PROTOCOL 2", *request[:-1]]:
                f.write(line.encode() + b"\n")
                f.flush()
                answers.append(f.readline().decode(errors="replace"))
            f.write(request[-1].encode() + b"\n")
            f.flush()
            return "".join(answers) + "----\n" + f.read().decode(errors="replace")
    except OSError as exc:
        return f"RAS: {exc}\n"


def threads(pid: int) -> dict[str, object]:
    """Per thread: name, state, CPU ticks, wchan (what the hang looks like from /proc)."""
    found: dict[str, object] = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        with contextlib.suppress(OSError):
            stat = Path(task, "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            wchan = Path(task, "wchan").read_text() if Path(task, "wchan").exists() else ""
            found[os.path.basename(task)] = {
                "comm": comm, "state": fields[0], "ticks": int(fields[11]) + int(fields[12]),
                "wchan": wchan,
            }  # fmt: skip
    return found


def hang(mode: str, port: int) -> None:
    """Two ranks on the one GPU, rank 1 misbehaving as ``mode``; look at them while they hang."""
    here = WORK / f"hang-{mode}"
    here.mkdir()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    env.update(NCCL_NET="Socket", NCCL_SOCKET_IFNAME="=lo", NCCL_DEBUG="INFO")
    # Flight Recorder, armed under both names (torch renamed TORCH_NCCL_* to TORCH_FR_*).
    for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        env[name] = "2000"
    for name in ("TORCH_FR_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"):
        env[name] = f"{here}/pipe_"
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        env[name] = f"{here}/fr_"
    ranks = []
    for rank in range(2):
        renv = dict(env, RANK=str(rank), LOCAL_RANK="0", NCCL_HOSTID=f"capture-host{rank}")
        log = open(here / f"rank{rank}.log", "w")  # noqa: SIM115 - closed with the process
        argv = [PY, JOB, "--backend", "nccl", "--mode", mode]
        ranks.append((subprocess.Popen(argv, env=renv, stdout=log, stderr=log), log))
    began = time.monotonic()
    while time.monotonic() - began < 90:
        text = "".join((here / f"rank{r}.log").read_text() for r in range(2))
        if text.count("steps done") >= 2 or any(p.poll() is not None for p, _ in ranks):
            break
        time.sleep(1)
    note(f"hang-{mode}: ranks in their last step after {time.monotonic() - began:.0f}s")
    time.sleep(12)
    pids = {r: p.pid for r, (p, _) in enumerate(ranks) if p.poll() is None}
    first = {r: threads(pid) for r, pid in pids.items()}
    (here / "ras-status.txt").write_text(ras(["STATUS"]))
    (here / "ras-verbose.txt").write_text(ras(["VERBOSE STATUS"]))
    (here / "ras-status.json").write_text(ras(["SET FORMAT json", "STATUS"]))
    note(f"hang-{mode}: RAS asked")
    for pipe in glob.glob(f"{here}/pipe_*.pipe"):
        with contextlib.suppress(OSError):
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"1")
            os.close(fd)
    for r, pid in pids.items():
        t = time.monotonic()
        save(f"hang-{mode}/pyspy-rank{r}.json", [PYSPY, "dump", "--pid", str(pid), "--json"], 30)
        save(f"hang-{mode}/pyspy-rank{r}.txt", [PYSPY, "dump", "--pid", str(pid), "--native"], 30)
        note(f"hang-{mode}: py-spy rank {r} (both dumps) {time.monotonic() - t:.2f}s")
    time.sleep(2)
    second = {r: threads(pid) for r, pid in pids.items()}
    (here / "threads.json").write_text(json.dumps({"first": first, "second": second}, indent=1))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(glob.glob(f"{here}/fr_*")) < len(pids):
        time.sleep(0.5)
    note(f"hang-{mode}: flight recorder dumps {sorted(os.listdir(here))}")
    for p, log in ranks:
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGKILL)
        p.wait()
        log.close()
    for pipe in glob.glob(f"{here}/pipe_*.pipe"):
        os.unlink(pipe)


def ended(mode: str, port: int, debug: str) -> None:
    """Four NCCL ranks under torchrun (each its own NCCL host on the one GPU), rank 2 misbehaving
    as ``mode``, left to the watchdog's 15 s timeout and torchrun's teardown: the text a job
    leaves after its hang. torchrun's own output (--tee 3: every rank's lines, labelled) in
    torchrun.log, each rank's files under logs/ (--log-dir), Flight Recorder's dumps on timeout."""
    here = WORK / f"ended-{mode}"
    here.mkdir()
    env = dict(os.environ, TORCH_NCCL_DUMP_ON_TIMEOUT="1")
    if debug:
        env["NCCL_DEBUG"] = debug
    for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        env[name] = "2000"
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        env[name] = f"{here}/fr_"
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port",
            str(port), "--log-dir", str(here / "logs"), "--tee", "3", JOB,
            "--backend", "nccl", "--mode", mode, "--rank", "2", "--host-per-rank",
            "--ddp_timeout", "15"]  # fmt: skip
    began = time.monotonic()
    with (here / "torchrun.log").open("w") as log:
        job = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
        try:
            rc: int | None = job.wait(timeout=120)
        except subprocess.TimeoutExpired:
            rc = None
        with contextlib.suppress(OSError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    note(f"ended-{mode}: torchrun rc {rc} after {time.monotonic() - began:.0f}s")


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    OUT.mkdir(parents=True, exist_ok=True)
    save("nvidia-smi.txt", ["nvidia-smi"])
    save("nvidia-smi-q.xml", ["nvidia-smi", "-q", "-x"])
    save("nvidia-smi-topo-m.txt", ["nvidia-smi", "topo", "-m"])
    save("pip-list.txt", [PY, "-m", "pip", "list"])
    doctor = [PY, "-m", "doctor"]
    save("probe.json", [*doctor, "probe"])
    save("probe-torch.json", [*doctor, "probe", "--torch"])
    save("preflight.txt", [*doctor, "--verbose", "preflight", "--local"], 240)
    save("preflight.json", [*doctor, "preflight", "--local", "--format", "json"], 240)
    nccl = dict(os.environ, NCCL_DEBUG="INFO")
    save("allreduce.json", [*doctor, "allreduce", "--local", "--format", "json"], 240, env=nccl)
    save("topo.txt", [*doctor, "topo"])
    try:
        began = time.monotonic()
        staged = run_two_hosts()
        report = {"allreduce": staged.section(), "findings": jsonable(staged.findings)}
        (WORK / "allreduce-two-hosts.json").write_text(json.dumps(report, indent=1))
        note(f"allreduce-two-hosts.json: {report['allreduce']['status']} in "
             f"{time.monotonic() - began:.1f}s")  # fmt: skip
    except Exception as exc:  # the steps after it still run
        note(f"allreduce-two-hosts.json: {type(exc).__name__}: {exc}")
    save("pytest-gpu.txt", [PY, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                            "tests/allreduce/test_gpu.py", "tests/gpu"], 300, cwd=ROOT)  # fmt: skip
    for port, mode in enumerate(("sleep", "op", "size", "kill"), start=29610):
        try:
            hang(mode, port)
        except Exception as exc:  # one broken hang must not lose the others
            note(f"hang-{mode}: {type(exc).__name__}: {exc}")
    for port, (mode, debug) in enumerate((("sleep", ""), ("op", "WARN"), ("kill", "")), 29630):
        try:
            ended(mode, port, debug)
        except Exception as exc:
            note(f"ended-{mode}: {type(exc).__name__}: {exc}")
    STEPS.write_log("capture.log")
    with tarfile.open(OUT / "capture.tar.gz", "w:gz") as tar:
        tar.add(WORK, arcname="capture")


if __name__ == "__main__":
    main()
