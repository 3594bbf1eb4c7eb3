"""Runs on each node around the user's command: starts it, keeps track of everything it starts,
and ends all of it. Shipped like the allreduce worker (``python -c BOOT <nbytes> <spec-json>``,
this source on stdin); standard library only, valid on Python 3.8.

The command runs in a session of its own, its output passed straight through. The keeper is the
node's child subreaper, so a process that leaves the command's session (torchrun starts each
worker in a new session) is still found among the keeper's descendants. What is left on stdin is
the lifeline: at its EOF (the controller stops the job, was interrupted, or its connection died),
or at SIGTERM/SIGHUP/SIGINT, every descendant gets SIGTERM, then SIGKILL after ``grace`` seconds.
When the command ends by itself, whatever it left running is ended the same way; then the files
the doctor had it make (``remove``: glob patterns) are removed. The keeper's exit code is the
command's (128 + N for a signal N).
"""

import contextlib
import ctypes
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
POLL = 0.1


def descendants(root):
    """Every process below ``root``, from /proc (children before they can be reparented)."""
    children = {}  # type: dict
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def signal_all(sig, extra=()):
    for pid in list(extra) + descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_all(child, grace):
    """SIGTERM to the command's group and every descendant; SIGKILL to what is left at grace."""
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGTERM)
    signal_all(signal.SIGTERM)
    stop_at = time.monotonic() + grace
    while time.monotonic() < stop_at:
        reap_child = child.poll()
        reap()
        if reap_child is not None and not descendants(os.getpid()):
            return
        time.sleep(POLL)
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    signal_all(signal.SIGKILL)
    child.wait()
    reap()


def main(spec):
    # Linux only; without it, a process that left the session may outlive the job.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    cwd = spec.get("cwd")
    try:
        child = subprocess.Popen(
            spec["argv"],
            env=env,
            cwd=cwd if cwd and os.path.isdir(cwd) else None,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        sys.stderr.write("doctor: cannot run %s: %s\n" % (spec["argv"][0], exc.strerror))
        return 127
    stop = threading.Event()

    def lifeline():
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=lifeline, daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while child.poll() is None and not stop.wait(POLL):
        pass
    grace = float(spec.get("grace", 5.0))
    if child.poll() is None:
        end_all(child, grace)
    elif descendants(os.getpid()):
        end_all(child, min(grace, 2.0))  # what the command left running when it ended
    # Files the doctor had the job make (Flight Recorder's pipes and dumps): gone with it.
    for pattern in spec.get("remove") or ():
        for path in glob.glob(pattern):
            with contextlib.suppress(OSError):
                os.unlink(path)
    code = child.returncode
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[2])))
