"""A clean Debian root: the machine a new user starts from, with only the distribution's python3.

debootstrap's minbase with python3 and nothing else: no pip, no ensurepip (Debian keeps it in
python3-venv), no CA certificates, and the EXTERNALLY-MANAGED marker that refuses system-wide pip
installs (PEP 668). A command runs in it through chroot, in a private mount and PID namespace with
/proc, /sys and /dev mounted there: when it ends, nothing it started runs on and nothing stays
mounted. Needs root and debootstrap (tests/run.py installs it), and Debian's mirror and the
package index, as a new user's machine does.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIRROR = "http://deb.debian.org/debian"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CHECKOUT = "/root/cluster-doctor"  # where a user's clone of the project lies in the root
SITE_CA = "/root/site-ca.pem"
# The namespace's first process mounts the root's kernel file systems, then becomes the command.
ENTER = (
    'mount -t proc proc "$1/proc" && mount --rbind /sys "$1/sys" && mount --rbind /dev "$1/dev"'
    ' && root="$1" && shift && exec chroot "$root" env -i "$@"'
)


def build(root: Path, suite: str = "bookworm") -> None:
    """Debootstrap ``suite`` with python3 into ``root``."""
    argv = ["debootstrap", "--variant=minbase", "--include=python3", suite, str(root), MIRROR]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def copy_checkout(root: Path) -> None:
    """This checkout's files (tracked, and untracked ones git does not ignore) at CHECKOUT: what
    a clone of it holds, without .venv or caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    dest = root / CHECKOUT.lstrip("/")
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is listed, and left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def site_ca(root: Path) -> dict[str, str]:
    """The CA bundle pip is given on this machine, copied into the root, and PIP_CERT naming it:
    what a user behind a TLS-inspecting proxy (as this test bed's network is) sets up."""
    bundle = os.environ.get("PIP_CERT") or ssl.get_default_verify_paths().cafile
    if not bundle or not Path(bundle).is_file():
        return {}
    shutil.copy(bundle, root / SITE_CA.lstrip("/"))
    return {"PIP_CERT": SITE_CA}


def run(
    root: Path, command: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``command`` run by sh in the root as root's login would, with only ``env`` added."""
    given = [
        f"{k}={v}" for k, v in {"HOME": "/root", "PATH": PATH, "LANG": "C.UTF-8", **env}.items()
    ]
    argv = ["unshare", "--mount", "--pid", "--fork", "sh", "-c", ENTER, "sh", str(root)]
    return subprocess.run(
        [*argv, *given, "sh", "-c", command],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def files(root: Path, *skip: str) -> set[str]:
    """Every path in the root but those under /proc, /sys, /dev, /tmp and ``skip``."""
    left_out = {root / p.lstrip("/") for p in ("/proc", "/sys", "/dev", "/tmp", *skip)}
    found: set[str] = set()
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in left_out]
        found.update(str((here / n).relative_to(root)) for n in [*dirs, *names])
    return found
