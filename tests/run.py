#!/usr/bin/env python3
"""Run the tests on a fresh Debian machine: install what they need when it is missing, then pytest.

    python3 tests/run.py [pytest arguments]     # e.g. -q, or tests/render -k html
    python3 tests/run.py --prepare              # install only; print the Python the tests use
    python3 tests/run.py --check                # install nothing; exit 1 naming what is missing

Run it as root: the multi-node tests build network namespaces with real sshd, and missing Debian
packages are installed with apt-get. Nothing is installed that is already there, so a second run
goes straight to pytest. Standard library only: it runs before anything else is installed.

What it installs when missing:
* Debian: the package of every program a test runs, directly or through the doctor (PROGRAMS:
  OpenSSH, Open MPI, iproute2, net-tools, ping, procps, busybox, xmllint, Slurm and munge,
  Chromium and its driver ...), python3-venv (ensurepip, for the virtualenvs tests make);
  python3-pip, unless the system Python is externally managed
  (PEP 668): then the tests run in .venv here, made as install.py makes it;
* PyPI: torch's CPU build first, pinned (an unpinned torch pulls a multi-GB CUDA build), then
  this checkout, editable, with its test and torch extras.

--check lists everything that is missing, not only the first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from install import VENV, Failed, installed, make_venv, quiet  # noqa: E402 (stdlib only too)

# Every program the tests run (by argv, through `ip netns exec`, over ssh, or through the doctor
# under test) and the Debian package that has it: what every Python process of a whole run in a
# debootstrapped root started, logged by an audit hook. tests/test_runner.py fails when a test's
# argv names a program missing here. Essential packages are listed too: a bare root has them.
PROGRAMS = {
    "sh": "dash", "bash": "bash", "grep": "grep", "cut": "coreutils", "dd": "coreutils",
    "cat": "coreutils", "ls": "coreutils", "rm": "coreutils", "sleep": "coreutils",
    "timeout": "coreutils", "env": "coreutils", "true": "coreutils", "df": "coreutils",
    "head": "coreutils", "tail": "coreutils", "uname": "coreutils", "mkdir": "coreutils",
    "awk": "mawk", "which": "debianutils",
    "hostname": "hostname", "getent": "libc-bin",
    "ldconfig": "libc-bin", "dpkg-query": "dpkg", "apt-get": "apt",
    "unshare": "util-linux", "nsenter": "util-linux", "taskset": "util-linux",
    "dmesg": "util-linux", "lscpu": "util-linux", "mount": "mount", "umount": "mount",
    "mkswap": "util-linux", "swapon": "util-linux", "swapoff": "util-linux",
    "setpriv": "util-linux",
    "kill": "procps", "pgrep": "procps", "pkill": "procps", "ps": "procps", "sysctl": "procps",
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "ping": "iputils-ping",
    "busybox": "busybox", "ifconfig": "net-tools",
    "ssh": "openssh-client", "ssh-keygen": "openssh-client", "sshd": "openssh-server",
    "mpirun": "openmpi-bin", "ompi_info": "openmpi-bin", "mpicc": "libopenmpi-dev",
    "munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client",
    "salloc": "slurm-client", "sbatch": "slurm-client", "sinfo": "slurm-client",
    "squeue": "slurm-client", "scontrol": "slurm-client", "scancel": "slurm-client",
    "xmllint": "libxml2-utils", "chromium": "chromium", "chromedriver": "chromium-driver",
    "cc": "gcc", "git": "git", "debootstrap": "debootstrap",
}  # fmt: skip
# What a program above needs beside it that no program names: cc links the stand-in librccl of
# tests/facts/test_rccl_library.py against libc (gcc only recommends libc6-dev, and recommends are
# not installed).
LIBRARIES = ("libc6-dev",)
# What the tests' Python needs that Debian's python3 leaves out: ensurepip (python3-venv), with
# which `python -m venv` puts pip in a new virtualenv (tests/test_runner.py makes one, as a user's
# bare Python); a clean Debian root has none, and its venv there failed.
PYTHON_PARTS = ("python3-venv",)
DEBIAN = tuple(sorted({*PROGRAMS.values(), *LIBRARIES, *PYTHON_PARTS}))
TORCH = "2.13.0"
EXTRAS = "this checkout with its test extras"
CHECK_ONLY = sys.argv[1:2] == ["--check"]
MISSING: list[str] = []  # what --check found missing, in the order it is installed


def say(text: str) -> None:
    print(f"tests/run.py: {text}", file=sys.stderr, flush=True)


def install(what: str, *commands: list[str]) -> None:
    """Run the commands that install ``what`` (with --check: only note it as missing)."""
    if CHECK_ONLY:
        MISSING.append(what)
        return
    for argv in commands:
        say(" ".join(argv))
        # Their output goes to stderr: stdout carries only the Python's path (--prepare).
        if subprocess.run(argv, stdout=sys.stderr, check=False).returncode != 0:
            sys.exit(f"tests/run.py: failed: {' '.join(argv)}")


def missing_debs(packages: tuple[str, ...]) -> list[str]:
    query = ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *packages]
    proc = subprocess.run(query, capture_output=True, text=True, check=False)
    lines = proc.stdout.splitlines()
    installed = {line.split()[0] for line in lines if line.endswith(" installed")}
    return [p for p in packages if p not in installed]


def externally_managed() -> bool:
    """Whether pip may not install into this Python (PEP 668: Debian's own python3)."""
    in_venv = sys.prefix != sys.base_prefix
    return not in_venv and Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").exists()


def prepare() -> str:
    """Install whatever is missing; the Python interpreter the tests run with."""
    use_venv = externally_managed()
    wanted = DEBIAN
    if not use_venv and not quiet([sys.executable, "-m", "pip", "--version"]):
        wanted += ("python3-pip",)
    debs = missing_debs(wanted)
    if debs and CHECK_ONLY:
        for deb in debs:
            programs = ", ".join(sorted(p for p, d in PROGRAMS.items() if d == deb))
            MISSING.append(f"Debian package {deb}" + (f" ({programs})" if programs else ""))
    elif debs:
        if os.geteuid() != 0:
            sys.exit(f"tests/run.py: run as root to install the missing packages: {' '.join(debs)}")
        os.environ["DEBIAN_FRONTEND"] = "noninteractive"
        install(
            " ".join(debs),
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *debs],
        )
    python = sys.executable
    if use_venv:
        python = str(VENV / "bin" / "python")
        if not Path(python).exists() and CHECK_ONLY:  # nothing to ask a Python not there yet
            MISSING.extend([f"the virtualenv {VENV}", f"torch {TORCH}", EXTRAS])
            return python
        if not Path(python).exists():
            make_venv(VENV)  # as install.py makes it: pip without python3-venv where need be
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    has_torch = (
        "import importlib.metadata as md, sys\n"
        f"sys.exit(md.version('torch').split('+')[0] != '{TORCH}')"
    )
    if not quiet([python, "-c", has_torch]):
        install(f"torch {TORCH}", [*pip, f"torch=={TORCH}"])
    if not installed(python, ("test", "torch")):
        install(EXTRAS, [*pip, "-e", f"{REPO}[test,torch]"])
    return python


def main(argv: list[str]) -> None:
    try:
        python = prepare()
    except Failed as exc:
        sys.exit(f"tests/run.py: {exc}")
    if MISSING:
        sys.exit("".join(f"tests/run.py: missing: {what}\n" for what in MISSING).rstrip("\n"))
    if argv[:1] in (["--prepare"], ["--check"]):
        print(python)
        return
    os.chdir(REPO)
    os.execv(python, [python, "-m", "pytest", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
