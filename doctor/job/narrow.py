"""A launch line narrowed to the vetted nodes (`doctor run --spares`): the nodes left out taken
out of its node list (``-H``, a hostfile, ``srun -w``, DeepSpeed's ``--include``), added to its
exclusions where it has no list (``srun --exclude``), its counts of nodes or processes that
counted them made to count the rest, and a rendezvous on a node left out moved to the first
node kept.

Pure, apart from reading the user's hostfile: the words in, the words out, the hostfile to write
(in the logs folder, never over the user's) and one phrase per change, printed before the launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from doctor.core.files import read_bounded
from doctor.core.nodeset import compact
from doctor.job.argv import LaunchLine, parse_launch
from doctor.nodes.inventory import MAX_HOSTFILE, Node

# Per launcher, its options that name the nodes, count them, or name the rendezvous host.
HOST_LISTS = {"mpirun": ("-H", "-host", "--host"), "horovodrun": ("-H", "--hosts")}
HOSTFILES = {
    "mpirun": ("-hostfile", "--hostfile", "-machinefile", "--machinefile", "--default-hostfile"),
    "horovodrun": ("-hostfile", "--hostfile"),
    "deepspeed": ("-H", "--hostfile"),
}
NODELISTS = {"srun": ("-w", "--nodelist")}
EXCLUDES = {"srun": ("-x", "--exclude"), "deepspeed": ("-e", "--exclude")}
INCLUDES = {"deepspeed": ("-i", "--include")}
NODE_COUNTS = {
    "torchrun": ("--nnodes",),
    "accelerate": ("--num_machines",),
    "deepspeed": ("--num_nodes",),
    "srun": ("-N", "--nodes"),
}
PROCESS_COUNTS = {"mpirun": ("-np", "-n", "--np"), "horovodrun": ("-np", "--num-proc")}
MASTERS = {
    "torchrun": ("--master-addr", "--master_addr", "--rdzv-endpoint", "--rdzv_endpoint"),
    "accelerate": ("--main_process_ip",),
    "deepspeed": ("--master_addr", "--master-addr"),
}


@dataclass(frozen=True)
class Narrowed:
    line: LaunchLine
    files: dict[Path, str] = field(default_factory=dict)  # path -> text, written before launch
    changes: list[str] = field(default_factory=list)  # one phrase per change, for the terminal


def host_of(entry: str) -> str:
    """``user@host:slots`` / ``host slots=4`` / ``[v6]:2`` -> the host."""
    word = entry.strip().split()[0] if entry.strip() else ""
    word = word.rsplit("@", 1)[-1]
    if word.startswith("["):
        return word[1:].split("]", 1)[0]
    return word.split(":", 1)[0]


def hostfile_without(text: str, out: set[str]) -> str:
    """The hostfile's lines less those of the nodes left out (comments and blanks kept)."""
    kept = [ln for ln in text.splitlines() if host_of(ln.split("#", 1)[0]) not in out]
    return "\n".join(kept) + "\n"


def _slots(nodes: Sequence[Node]) -> int:
    return sum(n.slots or 1 for n in nodes)


def _hosts(nodes: Sequence[Node]) -> str:
    return ",".join(f"{n.name}:{n.slots}" if n.slots else n.name for n in nodes)


class _Words:
    """The launch line's words, with what was changed in them."""

    def __init__(self, line: LaunchLine) -> None:
        self.line = line
        self.argv = list(line.argv)
        self.changes: list[str] = []
        self.found: set[str] = set()  # what the line has: "hosts", "excluded"

    def rewrite(
        self, options: tuple[str, ...], new: Callable[[str], str | None], what: str = ""
    ) -> None:
        """Every value of these launcher options (``--opt v`` or ``--opt=v``) through ``new``
        (None: left as it is)."""
        for i in range(self.line.at + 1, min(self.line.program, len(self.argv))):
            name, eq, value = self.argv[i].partition("=")
            at = i if eq else i + 1
            if name not in options or at >= len(self.argv):
                continue
            value = value if eq else self.argv[at]
            self.found.add(what)
            changed = new(value)
            if changed is not None and changed != value:
                self.argv[at] = f"{name}={changed}" if eq else changed
                self.changes.append(f"{name} {changed} (was {value})")

    def insert(self, words: list[str]) -> None:
        """Right after the launcher's own word."""
        at = self.line.at + 1
        self.argv[at:at] = words
        self.changes.append(" ".join(words))


def narrow(line: LaunchLine, nodes: Sequence[Node], out: set[str], folder: Path) -> Narrowed:
    """``line`` for ``nodes`` less ``out``: what the launcher names, counts and meets at."""
    kept = [n for n in nodes if n.name not in out]
    words, tool = _Words(line), line.tool
    files: dict[Path, str] = {}

    def hostfile(value: str) -> str:
        path = folder / f"hostfile-{len(files) + 1}"
        files[path] = hostfile_without(
            read_bounded(Path(value), MAX_HOSTFILE).decode(errors="replace"), out
        )
        return str(path)

    def master(value: str) -> str | None:
        host, sep, port = value.rpartition(":") if ":" in value else (value, "", "")
        return f"{kept[0].name}{sep}{port}" if host in out and kept else None

    def listed(sep: str) -> Callable[[str], str]:
        return lambda value: sep.join(e for e in value.split(sep) if host_of(e) not in out)

    words.rewrite(HOST_LISTS.get(tool, ()), listed(","), "hosts")
    words.rewrite(HOSTFILES.get(tool, ()), hostfile, "hosts")
    words.rewrite(NODELISTS.get(tool, ()), lambda v: compact(n.name for n in kept), "hosts")
    words.rewrite(INCLUDES.get(tool, ()), listed("@"), "hosts")
    before, after = (len(nodes), _slots(nodes)), (len(kept), _slots(kept))
    words.rewrite(
        NODE_COUNTS.get(tool, ()), lambda v: str(after[0]) if v == str(before[0]) else None
    )
    words.rewrite(
        PROCESS_COUNTS.get(tool, ()), lambda v: str(after[1]) if v == str(before[1]) else None
    )
    words.rewrite(MASTERS.get(tool, ()), master)
    if "hosts" not in words.found and out:
        _exclude(words, kept, out)
    return Narrowed(parse_launch(words.argv), files, words.changes)


def _exclude(words: _Words, kept: list[Node], out: set[str]) -> None:
    """A launcher that names no nodes runs where other means tell it (the allocation, a default
    hostfile): its exclusions get the nodes left out, or it is given the kept ones. A per-node
    launcher needs neither: the doctor starts it on the kept nodes only."""
    tool = words.line.tool
    if tool in ("mpirun", "horovodrun"):
        words.insert(["-H", _hosts(kept)])
    elif tool == "srun":
        words.rewrite(EXCLUDES["srun"], lambda v: f"{v},{compact(out)}", "excluded")
        if "excluded" not in words.found:
            words.insert([f"--exclude={compact(out)}"])
    elif tool == "deepspeed":
        words.rewrite(EXCLUDES["deepspeed"], lambda v: "@".join([v, *sorted(out)]), "excluded")
        if "excluded" not in words.found:
            words.insert(["--exclude", "@".join(sorted(out))])
