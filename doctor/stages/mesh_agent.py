"""Runs on one node: ``ssh -o BatchMode=yes`` to each peer, as mpirun and pdsh would; prints JSON.

Shipped like the probe (source piped into ``python3``), so it is stdlib-only and valid on
Python 3.8. It captures each attempt's exit status and stderr; the controller classifies them.
Peers are tried in the order given (the controller rotates it per node so that every sshd sees
only a few unauthenticated connections at once, under OpenSSH's MaxStartups default of 10).
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
    argv += [target["host"], "true"]
    started = time.monotonic()
    entry = {"target": target["name"], "argv": argv}
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        entry["error"] = {"kind": "absent", "detail": "%s: %s" % (argv[0], exc.strerror)}
        return entry
    try:
        _, err = proc.communicate(timeout=spec["connect_timeout"] + spec["grace"])
        entry["rc"] = proc.returncode
        entry["stderr"] = err[:4096].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        entry["error"] = {"kind": "timeout", "detail": "ssh still running after the deadline"}
    entry["seconds"] = round(time.monotonic() - started, 4)
    return entry


def main(argv):
    spec = json.loads(argv[1])
    targets = list(spec["targets"])
    results = [None] * len(targets)
    lock = threading.Lock()
    queue = list(enumerate(targets))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index, target = queue.pop(0)
            results[index] = attempt(target, spec)

    threads = [threading.Thread(target=worker) for _ in range(max(1, spec["parallel"]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    json.dump({"mesh_agent": 1, "results": results}, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
