"""The launcher that matches a transport: programs go where the probe went."""

from __future__ import annotations

from doctor.nodes.transport import BatchTransport, Transport
from doctor.nodes.transport.exec import ExecLauncher, ExecTransport
from doctor.nodes.transport.launch import Launcher, LocalLauncher
from doctor.nodes.transport.local import LocalTransport
from doctor.nodes.transport.srun import SrunTransport


def launcher_for(transport: Transport | BatchTransport) -> Launcher:
    """Here, through the exec prefix, through srun, or over the SSH transport's connections."""
    # SSH costs a paramiko import (0.2 s) that a run on this machine alone need not pay.
    if isinstance(transport, LocalTransport):
        return LocalLauncher()
    if isinstance(transport, ExecTransport):
        return ExecLauncher(transport.prefix)
    if isinstance(transport, SrunTransport):
        from doctor.nodes.transport.srun_launch import SrunLauncher

        return SrunLauncher()
    from doctor.nodes.transport.ssh_launch import SshLauncher

    return SshLauncher(transport)  # type: ignore[arg-type]
