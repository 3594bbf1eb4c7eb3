"""Which nodes the user named, and how to reach them: the flags every command that reaches nodes
takes (-H, --hostfile, --slurm, SSH's settings, --launcher, --exec), read by
doctor/nodes/connect.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from doctor.core.flag import flag


class Launcher(str, enum.Enum):
    auto = "auto"
    local = "local"
    srun = "srun"


@dataclass(frozen=True)
class Targets:
    """Which nodes, and how to reach them."""

    hosts: Annotated[
        str | None,
        flag("--hosts", "-H", help="Nodes: host[:slots][,host...] (user@host:port:slots too)."),
    ] = None
    hostfile: Annotated[
        Path | None,
        flag("--hostfile", help="MPI/DeepSpeed (host slots=N) or Horovod (host:N) hostfile."),
    ] = None
    slurm: Annotated[
        bool, flag("--slurm", help="The nodes of this SLURM allocation (SLURM_JOB_NODELIST).")
    ] = False
    ssh_config: Annotated[
        Path | None, flag("--ssh-config", help="ssh_config for aliases (default ~/.ssh/config).")
    ] = None
    ssh_port: Annotated[
        int | None, flag("--ssh-port", min=1, max=65535, help="SSH port where none is given.")
    ] = None
    identity: Annotated[
        list[str] | None,
        flag("--identity", "-i", help="Private key file for SSH (repeatable)."),
    ] = None
    known_hosts: Annotated[
        list[str] | None,
        flag("--known-hosts", help="known_hosts file (default ~/.ssh/known_hosts; repeatable)."),
    ] = None
    accept_new: Annotated[
        bool,
        flag(
            "--accept-new-host-keys",
            help="Trust and record unknown host keys (OpenSSH accept-new); changed keys stay "
            "refused.",
        ),
    ] = False
    connect_timeout: Annotated[
        float, flag("--connect-timeout", min=0.5, help="Seconds to connect to a node.")
    ] = 10.0
    python: Annotated[
        str | None,
        flag("--python", help="Python on the nodes (default: the first python3 found there)."),
    ] = None
    launcher: Annotated[
        Launcher,
        flag(
            "--launcher",
            help="How to reach the nodes; auto uses srun inside a SLURM allocation.",
        ),
    ] = Launcher.auto
    slurm_nodes: Annotated[
        str | None, flag("--slurm-nodes", help="SLURM nodes to probe, e.g. gpu[01-16].")
    ] = None
    partition: Annotated[
        str | None, flag("--partition", help="Probe the nodes of this SLURM partition.")
    ] = None
    local: Annotated[bool, flag("--local", help="Check only this node.")] = False
    exec: Annotated[
        str | None,
        flag(
            "--exec",
            help="Reach the nodes through this command instead of SSH, {node} the node: "
            "'kubectl exec -i {node} -c trainer --', 'docker exec -i {node}'.",
        ),
    ] = None
