"""Programs through srun: each one a one-task step on its node.

Killing srun alone leaves its task running on the node, so a process's ``kill`` ends it as the
probe's step is ended (``end_step``: SIGTERM to srun, scancel by a name unique to it, then SIGKILL
to what is left). srun runs in the doctor's own
environment, so inside an allocation the steps belong to it (``--overlap``).
"""

from __future__ import annotations

import os
import subprocess

from doctor.nodes.inventory import Node
from doctor.nodes.transport.launch import LocalLauncher, LocalProcess, Process
from doctor.nodes.transport.srun import end_step, job_name, slurm_tool, step_options

# Seconds a step may wait for its node when srun must make an allocation of its own.
STEP_TIMEOUT = 60.0


class SrunProcess(LocalProcess):
    def __init__(self, proc: subprocess.Popen[bytes], name: str) -> None:
        super().__init__(proc)
        self.name = name

    def kill(self) -> None:
        end_step(self.name, self.proc, os.environ)
        super().kill()


class SrunLauncher:
    """Starts each program with ``srun --nodes=1 --ntasks=1 --nodelist=<node>``."""

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        name = job_name()
        srun = [
            slurm_tool("srun"),
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={node.name}",
            *step_options(os.environ, name, STEP_TIMEOUT),
            *argv,
        ]
        started = LocalLauncher().start(node, srun, stdin)
        if isinstance(started, str):
            return started
        assert isinstance(started, LocalProcess)
        return SrunProcess(started.proc, name)
