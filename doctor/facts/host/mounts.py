"""The mount table: /proc/self/mountinfo as the probe read it, or a pasted `mount` / `findmnt`.

mountinfo (proc(5)): "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root
rw,errors=continue": mount id, parent id, major:minor, root, mount point, options, optional
fields ended by "-", then the filesystem type, the source and the superblock's options. The mount
point escapes space, tab, newline and backslash as octal (\\040).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs")
MAX_MOUNTS = 20000


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str  # "nfs4", "fuse.sshfs", "overlay", ...
    source: str  # "server:/export", "/dev/nvme0n1p1", "tmpfs"
    options: tuple[str, ...]  # the mount's and the superblock's, in that order

    @property
    def network(self) -> bool:
        base = self.fstype.split(".")[0]
        return base in NETWORK_FS or self.fstype.startswith("fuse.")

    @property
    def read_only(self) -> bool:
        return "ro" in self.options


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    out = []
    for line in text.splitlines()[:MAX_MOUNTS]:
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(rest) < 2:
            continue
        options = (*fields[5].split(","), *(rest[2].split(",") if len(rest) > 2 else ()))
        out.append(Mount(_unescape(fields[4]), rest[0], _unescape(rest[1]), options))
    return tuple(out)


# `mount` (util-linux, busybox): "server:/export on /home type nfs4 (rw,relatime,vers=4.2)"
_MOUNT_LINE = re.compile(r"^(?P<src>\S+) on (?P<point>/\S*) type (?P<type>\S+) \((?P<opts>[^)]*)\)")
# `findmnt` (tree or -l): "├─/home  server:/export nfs4  rw,relatime"
_FINDMNT_LINE = re.compile(
    r"^[\s│├└─|`-]*(?P<point>/\S*)\s+(?P<src>\S+)\s+(?P<type>\S+)\s+(?P<opts>\S+)\s*$"
)


def parse_mount_listing(text: str) -> tuple[Mount, ...]:
    """`mount` or `findmnt` output: the same mounts as mountinfo gives (its header skipped)."""
    out = []
    for line in text.splitlines()[:MAX_MOUNTS]:
        m = _MOUNT_LINE.match(line.strip()) or _FINDMNT_LINE.match(line.rstrip())
        if m and m.group("point") != "TARGET":
            options = tuple(m.group("opts").split(","))
            out.append(Mount(m.group("point"), m.group("type"), m.group("src"), options))
    return tuple(out)


def mount_of(path: str, mounts: tuple[Mount, ...]) -> Mount | None:
    """The mount a path lives on: the last-mounted of the longest mount points above it."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best
