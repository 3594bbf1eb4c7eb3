"""The nodes to check: from -H, a hostfile (MPI, Horovod, DeepSpeed), SLURM, and ssh_config.

Grammars (one entry per host; ``#`` starts a comment in files):

- ``-H``: comma-separated ``[user@]host[:slots]`` (horovodrun), or ``[user@]host:port:slots``.
- hostfile, MPI and DeepSpeed style: ``[user@]host[:port] [slots=N] [max_slots=N]``.
- hostfile, Horovod style: ``[user@]host:N``.
- SLURM: ``SLURM_JOB_NODELIST`` (``node[01-04]``) with slots from ``SLURM_TASKS_PER_NODE``.

Each name is then looked up in ssh_config (HostName, Port, User, IdentityFile,
UserKnownHostsFile, ProxyJump), the way ``ssh name`` would resolve it. A malformed or duplicate
entry is a UsageError naming where it was (exit 2).
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import hostlist

if TYPE_CHECKING:
    import paramiko

from doctor.core.errors import UsageError
from doctor.core.files import read_bounded
from doctor.core.nodeset import check_host

MAX_SLOTS = 1 << 16  # slots (ranks) one node may be given
MAX_HOSTFILE = 16 << 20  # bytes: a million hosts fit


@dataclass(frozen=True)
class Node:
    """One node as the user named it; ``address`` is what we connect to (None: this machine)."""

    name: str
    address: str | None = None
    port: int = 22
    user: str | None = None
    slots: int | None = None
    identity_files: tuple[str, ...] = ()
    known_hosts: tuple[str, ...] = ()
    proxy_jump: str | None = None
    # The entry as the user wrote it (``node1:8``, ``node1 slots=8``), for lists written back in
    # the same form (--healthy-hosts); not part of the node's identity.
    given: str = field(default="", compare=False)

    @property
    def local(self) -> bool:
        return self.address is None

    @staticmethod
    def parse_jump(text: str) -> Node:
        """The first hop of a ProxyJump value (``[user@]host[:port]``); later hops are ignored."""
        first = text.split(",")[0].strip()
        entry = _parse_target(first, "ProxyJump", port_field=True)
        return Node(entry.host, entry.host, entry.port or 22, entry.user)


def local_node() -> Node:
    return Node(name=socket.gethostname())


@dataclass(frozen=True)
class _Entry:
    host: str
    user: str | None
    port: int | None
    slots: int | None
    where: str  # "line 3 of hosts.txt", "-H entry 2"
    given: str = ""  # the entry as written, comments and outer blanks left out


# A hostname or an IPv4 address, or an IPv6 address in brackets.
_HOST = r"(?:\[[0-9A-Fa-f:.%\w]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?)"
_USER = r"[A-Za-z_][A-Za-z0-9_.-]*"
_TARGET = re.compile(rf"^(?:(?P<user>{_USER})@)?(?P<host>{_HOST})(?::(?P<a>\d+))?(?::(?P<b>\d+))?$")


def _number(text: str, what: str, where: str, lo: int, hi: int) -> int:
    value = int(text)
    if not lo <= value <= hi:
        raise UsageError(f"{where}: {what} {value} is out of range ({lo}-{hi})")
    return value


def _parse_target(text: str, where: str, *, port_field: bool) -> _Entry:
    """``[user@]host[:a][:b]``: with port_field the one number is a port, else a slot count."""
    m = _TARGET.match(text)
    if not m:
        raise UsageError(f"{where}: cannot read host {text!r} (expected [user@]host[:slots])")
    host = check_host(m["host"].strip("[]"), where)
    a, b = m["a"], m["b"]
    port = slots = None
    if b is not None:  # host:port:slots
        if port_field:
            raise UsageError(f"{where}: {text!r} has two numbers; write host:port slots=N")
        port = _number(a, "port", where, 1, 65535)
        slots = _number(b, "slots", where, 1, MAX_SLOTS)
    elif a is not None:
        if port_field:
            port = _number(a, "port", where, 1, 65535)
        else:
            slots = _number(a, "slots", where, 1, MAX_SLOTS)
    return _Entry(host, m["user"], port, slots, where, text)


def parse_hosts_arg(text: str) -> list[_Entry]:
    """``-H a:8,b:8`` (horovodrun style)."""
    entries = []
    for i, part in enumerate(text.split(","), 1):
        part = part.strip()
        if not part:
            raise UsageError(f"-H entry {i}: empty host name")
        entries.append(_parse_target(part, f"-H entry {i} ({part!r})", port_field=False))
    return entries


_KEYVAL = re.compile(r"^(slots|max_slots|max-slots)=(\d+)$")


def parse_hostfile_text(text: str, source: str) -> list[_Entry]:
    """An MPI, DeepSpeed or Horovod hostfile (formats may not be mixed within a line)."""
    entries = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"line {lineno} of {source}"
        first, *rest = line.split()
        if not rest:  # "host" (MPI) or "host:N" (Horovod)
            entries.append(_parse_target(first, where, port_field=False))
            continue
        entry = _parse_target(first, where, port_field=True)
        slots = None
        for token in rest:
            m = _KEYVAL.match(token)
            if not m:
                raise UsageError(f"{where}: cannot read {token!r} (expected slots=N)")
            if m[1] == "slots":
                slots = _number(m[2], "slots", where, 1, MAX_SLOTS)
        entries.append(replace(entry, slots=slots, given=line))
    if not entries:
        raise UsageError(f"{source}: no hosts in it")
    return entries


def read_hostfile(path: Path) -> list[_Entry]:
    try:
        text = read_bounded(path, MAX_HOSTFILE).decode()
    except OSError as exc:
        raise UsageError(f"--hostfile {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--hostfile {path}: not a text file") from None
    return parse_hostfile_text(text, str(path))


def slurm_entries(env: Mapping[str, str]) -> list[_Entry]:
    """The hosts of the current SLURM allocation, with tasks per node as slots."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise UsageError("--slurm: SLURM_JOB_NODELIST is not set (run inside an allocation)")
    try:
        names = hostlist.expand_hostlist(nodelist)
    except hostlist.BadHostlist as exc:
        raise UsageError(f"SLURM_JOB_NODELIST={nodelist!r}: {exc}") from None
    slots: list[int | None] = [None] * len(names)
    tasks = env.get("SLURM_TASKS_PER_NODE")
    if tasks:
        try:
            counts = hostlist.parse_slurm_tasks_per_node(tasks)
        except (hostlist.BadHostlist, ValueError) as exc:
            raise UsageError(f"SLURM_TASKS_PER_NODE={tasks!r}: {exc}") from None
        if any(not 1 <= c <= MAX_SLOTS for c in counts):
            raise UsageError(
                f"SLURM_TASKS_PER_NODE={tasks!r}: tasks per node not in 1..{MAX_SLOTS}"
            )
        if len(counts) != len(names):
            raise UsageError(
                f"SLURM_TASKS_PER_NODE={tasks!r} gives {len(counts)} nodes, "
                f"SLURM_JOB_NODELIST has {len(names)}"
            )
        slots = list(counts)
    return [
        _Entry(check_host(n, "SLURM_JOB_NODELIST"), None, None, s, f"SLURM_JOB_NODELIST {n}", n)
        for n, s in zip(names, slots, strict=True)
    ]


# A ``Match exec`` line: the one ssh_config feature paramiko needs invoke for.
MATCH_EXEC = re.compile(r"^[ \t]*match\b.*\bexec\b", re.IGNORECASE | re.MULTILINE)


def _import_paramiko(match_exec: bool) -> ModuleType:
    """paramiko, imported (0.06 s) only once nodes are named, and without invoke unless needed.

    paramiko.config imports invoke, with unittest.mock and a vendored YAML, just to run the
    commands of ``Match exec`` lines: that is 0.05 s more, nearly half of paramiko's import,
    on the way to the first connection. Without such lines it is kept out; with them it is
    imported and handed to paramiko.config, even when paramiko came in without it earlier.
    """
    if not match_exec and "paramiko" not in sys.modules and "invoke" not in sys.modules:
        sys.modules["invoke"] = None  # type: ignore[assignment]  # `import invoke` then fails
        try:
            import paramiko
        finally:
            del sys.modules["invoke"]
    import paramiko
    import paramiko.config

    if match_exec and getattr(paramiko.config, "invoke", None) is None:
        import invoke

        paramiko.config.invoke = invoke  # type: ignore[attr-defined]
    return paramiko


def load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    """The user's ssh_config (``~/.ssh/config`` unless given); an empty one when there is none."""
    target = path or Path("~/.ssh/config").expanduser()
    try:
        text = (
            read_bounded(target, MAX_HOSTFILE).decode(errors="replace")
            if target.is_file()
            else None
        )
    except OSError as exc:
        raise UsageError(f"ssh config {target}: {exc}") from None
    paramiko = _import_paramiko(bool(text and MATCH_EXEC.search(text)))
    if text is None:
        if path is not None:
            raise UsageError(f"--ssh-config {path}: not a readable file")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_text(text)
    except paramiko.ConfigParseError as exc:
        raise UsageError(f"ssh config {target}: {exc}") from None


def resolve(
    entries: Iterable[_Entry], config: paramiko.SSHConfig, *, port: int | None = None
) -> list[Node]:
    """Apply ssh_config to each entry (explicit user/port win, then ssh_config, then --ssh-port)."""
    nodes: list[Node] = []
    seen: dict[str, str] = {}
    seen_target: dict[tuple[str, int, str | None], str] = {}
    for entry in entries:
        if entry.host in seen:
            raise UsageError(
                f"{entry.where}: duplicate host {entry.host!r} (first at {seen[entry.host]})"
            )
        seen[entry.host] = entry.where
        cfg = config.lookup(entry.host)
        try:
            cfg_port = int(cfg["port"]) if "port" in cfg else None
        except ValueError:
            raise UsageError(
                f"ssh config for {entry.host}: Port {cfg['port']!r} is not a number"
            ) from None
        where = f"ssh config for {entry.host}"
        if "proxyjump" in cfg:
            Node.parse_jump(cfg["proxyjump"])  # its host is checked as every host is
        node = Node(
            name=entry.host,
            address=check_host(cfg.get("hostname", entry.host), f"{where}: HostName"),
            port=entry.port or cfg_port or port or 22,
            user=entry.user or cfg.get("user"),
            slots=entry.slots,
            identity_files=tuple(cfg.get("identityfile", ())),
            known_hosts=tuple(
                os.path.expanduser(p) for p in cfg.get("userknownhostsfile", "").split()
            ),
            proxy_jump=cfg.get("proxyjump"),
            given=entry.given or entry.host,
        )
        target = (node.address or node.name, node.port, node.user)
        if target in seen_target:
            raise UsageError(
                f"{entry.where}: {entry.host!r} is the same host as {seen_target[target]}"
            )
        seen_target[target] = entry.where
        nodes.append(node)
    return nodes


def build_inventory(
    *,
    hosts: str | None = None,
    hostfile: Path | None = None,
    slurm: bool = False,
    ssh_config: Path | None = None,
    ssh_port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Node]:
    """The nodes from exactly one source; with none given, this machine alone (no SSH)."""
    environ = os.environ if env is None else env
    given = [
        name for name, on in (("-H", hosts), ("--hostfile", hostfile), ("--slurm", slurm)) if on
    ]
    if len(given) > 1:
        raise UsageError(f"give only one of -H, --hostfile, --slurm (got {', '.join(given)})")
    if hosts is not None:
        entries = parse_hosts_arg(hosts)
    elif hostfile is not None:
        entries = read_hostfile(hostfile)
    elif slurm or "SLURM_JOB_NODELIST" in environ:
        entries = slurm_entries(environ)
    else:
        return [local_node()]
    return resolve(entries, load_ssh_config(ssh_config), port=ssh_port)
