"""Real stack dumps and process tables of a hung job, as users paste them into an issue. Saves
under tests/fixtures/logs/hang/pasted (README.md there lists each file and how it was taken).

Run by hand as root on Linux with torch, py-spy, pystack, gcc and pdsh installed:
``python tests/explain/hang/capture_pasted.py``. The job is tests/hang/job.py under torchrun, 3
ranks over Gloo on loopback, with faulthandler armed through a sitecustomize of the capture's
own (SIGUSR1 dumps every thread; rank 2 also dumps after a timeout):

  fifo  rank 1's DataLoader worker blocks opening a FIFO nobody writes; ranks 0 and 2 wait in
        all_reduce. py-spy (text, --json, --native, --locals, --subprocesses), pystack (remote,
        --native), ps, top, pdsh, faulthandler (SIGUSR1, a timeout), then SIGINT to rank 1.
  gdb   the fifo job again: gdb's ``thread apply all py-bt`` of ranks 1 and 0.
  op    rank 1 broadcasts while the others all_reduce: py-spy of each, then SIGABRT to rank 2
        (PYTHONFAULTHANDLER: "Fatal Python error: Aborted" and every thread, then a core that
        py-spy --core and pystack core read).

A process in state D (a vfork parent whose child pauses, tests/fixtures/.../vfork_hold.c) runs
beside the job while ps and top look, so their tables hold a real D line.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "tests" / "fixtures" / "logs" / "hang" / "pasted"
JOB = ROOT / "tests" / "hang" / "job.py"
SITE = """\
import faulthandler, os, signal
faulthandler.register(signal.SIGUSR1, all_threads=True)
if os.environ.get("RANK") == "2" and os.environ.get("CAPTURE_LATER"):
    _later = open(os.environ["CAPTURE_LATER"], "w")
    faulthandler.dump_traceback_later(float(os.environ["CAPTURE_AFTER"]), file=_later)
"""
HOLD = """\
#include <sys/wait.h>
#include <unistd.h>
/* The parent waits in the kernel (state D) until its vfork child, which pauses, ends. */
int main(void) {
    pid_t child = vfork();
    if (child == 0) { pause(); _exit(0); }
    waitpid(child, 0, 0);
    return 0;
}
"""


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def save(name: str, how: str, text: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(text)
    print(f"saved {name}: {how}")


class Job:
    """tests/hang/job.py under torchrun, 3 ranks; its console (stdout and stderr) in a file."""

    def __init__(
        self, folder: Path, mode: str, port: int, later: float = 0, python: str = sys.executable
    ) -> None:
        self.folder = folder
        site = sysconfig.get_path("purelib")  # torch, for a Python other than this one
        env = dict(os.environ, PYTHONPATH=f"{folder}:{site}", PYTHONFAULTHANDLER="1")
        if later:
            env.update(CAPTURE_LATER=str(folder / "later.txt"), CAPTURE_AFTER=str(later))
        self.console = folder / f"{mode}.console"
        argv = [
            python, "-m", "torch.distributed.run", "--nproc-per-node", "3",
            "--master-addr", "127.0.0.1", "--master-port", str(port), str(JOB),
            "--mode", mode, "--rank", "1", "--fifo", str(folder / "fifo"),
        ]  # fmt: skip
        with self.console.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=out, env=env, cwd=folder, preexec_fn=cores
            )
        end = time.monotonic() + 240
        while self.console.read_text(errors="replace").count("steps done") < 3:
            if time.monotonic() > end or self.proc.poll() is not None:
                raise SystemExit(self.console.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        time.sleep(3)  # the DataLoader worker starts, the collectives block
        self.ranks = self.find_ranks()

    def find_ranks(self) -> dict[int, int]:
        """{rank: pid} of torchrun's ranks (children of its agent with RANK set)."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                env = dict(
                    item.split(b"=", 1)
                    for item in (entry / "environ").read_bytes().split(b"\0")
                    if b"=" in item
                )
                if ppid == self.proc.pid and b"RANK" in env:
                    found[int(env[b"RANK"])] = int(entry.name)
        return dict(sorted(found.items()))

    def children(self, pid: int) -> list[int]:
        text = run("ps", "-o", "pid=", "--ppid", str(pid))
        return [int(w) for w in text.split()]

    def end(self) -> str:
        for pid in self.ranks.values():
            for child in self.children(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in self.ranks.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return self.console.read_text(errors="replace")


def cores() -> None:
    """Let the job's processes dump core (into their folder, where core_pattern is "core")."""
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def hold_in_d(folder: Path) -> subprocess.Popen[bytes]:
    (folder / "vfork_hold.c").write_text(HOLD)
    run("gcc", "-O0", "-o", str(folder / "vfork_hold"), str(folder / "vfork_hold.c"))
    proc = subprocess.Popen([str(folder / "vfork_hold")])
    time.sleep(0.5)
    return proc


def release(proc: subprocess.Popen[bytes]) -> None:
    for child in run("ps", "-o", "pid=", "--ppid", str(proc.pid)).split():
        os.kill(int(child), signal.SIGKILL)
    proc.wait(timeout=10)


def fifo_captures(folder: Path) -> None:
    os.mkfifo(folder / "fifo")
    job = Job(folder, "fifo", 29671, later=60)
    r0, r1, r2 = job.ranks[0], job.ranks[1], job.ranks[2]
    worker = job.children(r1)[0]
    spy = shutil.which("py-spy") or "py-spy"
    save("pyspy_rank0_allreduce.txt", f"py-spy dump --pid {r0}", run(spy, "dump", "--pid", str(r0)))
    save(
        "pyspy_rank1_subprocesses.txt",
        f"py-spy dump --pid {r1} --subprocesses",
        run(spy, "dump", "--pid", str(r1), "--subprocesses"),
    )
    save("pyspy_rank2_locals.txt", "py-spy dump --locals", run(spy, "dump", "--pid", str(r2), "-l"))
    save("pyspy_rank0_native.txt", "py-spy dump --native", run(spy, "dump", "--pid", str(r0), "-n"))
    save("pyspy_rank1.json", "py-spy dump --json", run(spy, "dump", "--pid", str(r1), "--json"))
    save(
        "pyspy_rank0_native.json",
        "py-spy dump --json --native",
        run(spy, "dump", "--pid", str(r0), "--json", "--native"),
    )
    save("pystack_rank0.txt", "pystack remote", run("pystack", "remote", str(r0)))
    save(
        "pystack_rank1_native.txt",
        "pystack remote --native",
        run("pystack", "remote", "--native", str(r1)),
    )
    save("pystack_worker.txt", "pystack remote (worker)", run("pystack", "remote", str(worker)))
    held = hold_in_d(folder)
    try:
        save(
            "ps_eo_wchan.txt",
            "ps -eo pid,ppid,stat,wchan:32,args",
            run("ps", "-eo", "pid,ppid,stat,wchan:32,args"),
        )
        save("ps_aux.txt", "ps aux", run("ps", "aux"))
        save("ps_eLf.txt", "ps -eLf", run("ps", "-eLf"))
        pids = ",".join(str(p) for p in (r0, r1, r2, worker, held.pid))
        save(
            "ps_o_state.txt",
            "ps -o pid,state,wchan,cmd -p ...",
            run("ps", "-o", "pid,state,wchan,cmd", "-p", pids),
        )
        save("top_b.txt", "top -b -n1 -w 512", run("top", "-b", "-n1", "-w", "512"))
        save("top_bc.txt", "top -b -n1 -c -w 512", run("top", "-b", "-n1", "-c", "-w", "512"))
    finally:
        release(held)
    # pdsh's exec module, as if node1 held rank 0 and node2 rank 1 (%h: the node's name).
    (folder / "node1.pid").write_text(str(r0))
    (folder / "node2.pid").write_text(str(r1))
    hosts = ["pdsh", "-R", "exec", "-w", "node1,node2", "sh", "-c"]
    save(
        "pdsh_pyspy.txt",
        "pdsh -R exec -w node1,node2 py-spy dump --pid $(cat %h.pid)",
        run(*hosts, f"{spy} dump --pid $(cat {folder}/%h.pid)"),
    )
    save(
        "pdsh_ps.txt",
        "pdsh -R exec -w node1,node2 ps -o pid,stat,wchan:32,args -p $(cat %h.pid)",
        run(*hosts, f"ps -o pid,stat,wchan:32,args -p $(cat {folder}/%h.pid)"),
    )
    save(
        "pdsh_pystack.txt",
        "pdsh -R exec -w node1,node2 pystack remote $(cat %h.pid)",
        run(*hosts, f"pystack remote $(cat {folder}/%h.pid)"),
    )
    mark = job.console.stat().st_size
    for pid in (r0, r1, r2):
        os.kill(pid, signal.SIGUSR1)
        time.sleep(1)
    while not (folder / "later.txt").exists() or not (folder / "later.txt").stat().st_size:
        time.sleep(1)
    time.sleep(1)
    save("faulthandler_later_rank2.txt", "dump_traceback_later", (folder / "later.txt").read_text())
    save("faulthandler_usr1.txt", "SIGUSR1 to ranks 0, 1, 2", job.console.read_text()[mark:])
    mark = job.console.stat().st_size
    os.kill(r1, signal.SIGINT)
    time.sleep(5)
    save("traceback_sigint_rank1.txt", "SIGINT to rank 1", job.end()[mark:])


def op_captures(folder: Path) -> None:
    # The system Python (statically linked: py-spy finds its version in a core) with this
    # Python's torch (the same 3.11 ABI); core_pattern "core" writes into the job's folder.
    job = Job(folder, "op", 29673, python="/usr/bin/python3")
    spy = shutil.which("py-spy") or "py-spy"
    save(
        "pyspy_rank1_broadcast.txt",
        "py-spy dump (rank 1 in broadcast)",
        run(spy, "dump", "--pid", str(job.ranks[1])),
    )
    save(
        "pyspy_rank0_op.txt",
        "py-spy dump (rank 0 in all_reduce)",
        run(spy, "dump", "--pid", str(job.ranks[0])),
    )
    mark = job.console.stat().st_size
    os.kill(job.ranks[2], signal.SIGABRT)
    time.sleep(5)
    save("faulthandler_abort_rank2.txt", "SIGABRT to rank 2", job.end()[mark:])
    core = next(folder.glob("core*"))
    spy = shutil.which("py-spy") or "py-spy"
    save("pyspy_core_rank2.txt", "py-spy dump --core", run(spy, "dump", "--core", str(core)))
    save(
        "pystack_core_rank2.txt",
        "pystack core",
        run("pystack", "core", str(core), "/usr/bin/python3"),
    )
    core.unlink()


def gdb_captures(folder: Path) -> None:
    """gdb's py-bt (CPython's Tools/gdb/libpython.py, which this Python installs beside itself)
    for every thread of a rank waiting for its DataLoader and of one in all_reduce."""
    os.mkfifo(folder / "fifo")
    job = Job(folder, "fifo", 29675)
    helper = f"{sys.executable}-gdb.py"
    if not Path(helper).exists():
        helper = str(Path(sys.executable).resolve()) + "-gdb.py"
    for rank in (1, 0):
        argv = ["gdb", "-p", str(job.ranks[rank]), "-batch", "-ex", f"source {helper}"]
        save(
            f"gdb_pybt_rank{rank}.txt",
            f"gdb -p {job.ranks[rank]} -batch -ex 'thread apply all py-bt'",
            run(*argv, "-ex", "thread apply all py-bt"),
        )
    job.end()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hang-paste-") as tmp:
        folder = Path(tmp)
        (folder / "sitecustomize.py").write_text(SITE)
        which = sys.argv[1:] or ["fifo", "op", "gdb"]
        if "fifo" in which:
            fifo_captures(folder)
        if "op" in which:
            op_captures(folder)
        if "gdb" in which:
            gdb_captures(folder)


if __name__ == "__main__":
    main()
