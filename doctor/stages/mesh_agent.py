"""Runs on one node: ``ssh -o BatchMode=yes`` to peers, as mpirun and pdsh would.

Shipped like the probe (source on stdin), so it is stdlib-only and valid on Python 3.8. The rest
of stdin is the controller's voice: after ``{"ev": "ready"}`` the agent waits for ``try <i>``
(attempt target i now) and ``end`` (no more: finish and say done). The controller schedules
every attempt of the cluster, so no node makes, and no sshd takes, more than a few logins at
once (OpenSSH's MaxStartups default drops unauthenticated connections past 10). Each attempt's
exit status and stderr are printed as one JSON line the moment it ends (``{"ev": "link", ...}``),
so whatever was tested before a deadline is kept; the controller classifies them. End of input
before ``end`` means the controller went away: the agent kills what it started, and itself.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time


def attempt(target, spec):
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % spec["connect_timeout"]]
    if target.get("port"):
        argv += ["-p", str(target["port"])]
    if target.get("user"):
        argv += ["-l", target["user"]]
    # "--": whatever the host's name, ssh reads it as the destination, never as an option.
    argv += ["--", target["host"], "true"]
    started = time.monotonic()
    entry = {"target": target["name"], "argv": argv}
    try:
        # In our process group: when the controller kills the group or goes away, they go too.
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    except OSError as exc:
        entry["error"] = {"kind": "absent", "detail": "%s: %s" % (argv[0], exc.strerror)}
        return entry
    try:
        _, err = proc.communicate(timeout=spec["connect_timeout"] + spec["grace"])
        entry["rc"] = proc.returncode
        entry["stderr"] = err[:4096].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        entry["error"] = {"kind": "timeout", "detail": "ssh still running after the deadline"}
    entry["seconds"] = round(time.monotonic() - started, 4)
    return entry


def emit(lock, **fields):
    with lock:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def main(argv):
    spec = json.loads(argv[-1])
    with contextlib.suppress(OSError):
        os.setsid()  # our own group: what we start goes with us
    targets = spec["targets"]
    lock = threading.Lock()

    def run(index):
        entry = attempt(targets[index], spec)
        emit(lock, ev="link", index=index, **entry)

    threads = []
    emit(lock, ev="ready")
    while True:
        try:
            line = sys.stdin.buffer.readline()
        except (OSError, ValueError):
            line = b""
        words = line.decode("ascii", "replace").split()
        if not line:  # the controller went away
            with contextlib.suppress(OSError):
                os.killpg(os.getpgrp(), signal.SIGKILL)
            os._exit(0)
        if words[:1] == ["end"]:
            break
        if len(words) == 2 and words[0] == "try" and words[1].isdigit():
            index = int(words[1])
            if index < len(targets):
                thread = threading.Thread(target=run, args=(index,))
                thread.start()
                threads.append(thread)
    for thread in threads:
        thread.join()
    emit(lock, ev="done")


if __name__ == "__main__":
    main(sys.argv)
