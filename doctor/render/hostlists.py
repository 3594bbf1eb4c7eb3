"""Launch-ready lists of the vetted nodes (``--healthy-hosts``, ``--failed-hosts``).

The healthy list names every node with no FAIL, one a line, as the user gave it (``node1:8``,
``node1 slots=8``: a hostfile or ``-H`` list the launcher reads as it read the original); the
failed list names the nodes with a FAIL as one Slurm hostlist (``node[3,7-9]``), for
``srun --exclude`` or ``sbatch --exclude``. Each node's verdict is the report's
(``Report.node_verdicts``): a finding that names no node (cluster-wide) counts for none, so it
moves no node from one list to the other; the report, its exit code and ``doctor run``'s gate
still count it. Node names are written as they are, even with --redact: the lists are for the
next launch, not for sharing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from doctor.core.errors import UsageError
from doctor.core.files import write_whole
from doctor.core.flag import flag
from doctor.core.model import Severity
from doctor.core.nodeset import compact
from doctor.core.printable import say

if TYPE_CHECKING:
    from doctor.judge.report import Report


def healthy_hosts(report: Report) -> list[str]:
    """The nodes with no FAIL, as given (slots kept), in inventory order."""
    inventory = report.cluster.inventory
    return [
        (inventory[name].given or name) if name in inventory else name
        for name, verdict in report.node_verdicts().items()
        if not verdict.failed
    ]


def failed_hosts(report: Report) -> list[str]:
    """The nodes with a FAIL, in inventory order."""
    return [name for name, verdict in report.node_verdicts().items() if verdict.failed]


def cluster_wide_failures(report: Report) -> list[str]:
    """The codes of FAIL findings that name no node: counted for no node in either list."""
    found = (f.code for f in report.findings if f.severity is Severity.FAIL and not f.nodes)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class HostLists:
    """Where ``preflight`` and ``run`` write the vetted nodes, for the next launch."""

    healthy: Annotated[
        Path | None,
        flag(
            "--healthy-hosts",
            help="Write the nodes with no FAIL here, one a line, as given (slots kept).",
        ),
    ] = None
    failed: Annotated[
        Path | None,
        flag(
            "--failed-hosts",
            help="Write the nodes with a FAIL here, as a Slurm hostlist (srun --exclude).",
        ),
    ] = None

    def write(self, report: Report, quiet: bool = False) -> None:
        """Write the lists asked for, and say on stderr what went where."""
        said = []
        if self.healthy is not None:
            healthy = healthy_hosts(report)
            _write("--healthy-hosts", self.healthy, "".join(f"{h}\n" for h in healthy))
            said.append(f"{len(healthy)} healthy node(s) written to {self.healthy}")
        if self.failed is not None:
            failed = failed_hosts(report)
            _write("--failed-hosts", self.failed, f"{compact(failed)}\n" if failed else "")
            said.append(f"{len(failed)} failed node(s) written to {self.failed}")
        cluster_wide = cluster_wide_failures(report) if said else []
        if cluster_wide:
            said.append(f"in neither list: {', '.join(cluster_wide)} (names no node)")
        for line in [] if quiet else said:
            say(line)


def _write(flag_: str, path: Path, text: str) -> None:
    try:
        write_whole(path, text)
    except OSError as exc:
        raise UsageError(f"{flag_} {path}: {exc.strerror}") from None
