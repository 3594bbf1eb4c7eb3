"""Read a launch command line: which launcher, which nodes it names, where it meets.

Pure functions of the words the user typed. Only the launcher's own options are read (up to the
first bare word, the program): a training script's ``-H`` or ``--host`` is never taken for the
launcher's. An option this table does not know is taken as a switch without a value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The launchers that start every node themselves: run once, here.
SPREADING = frozenset({"mpirun", "horovodrun", "deepspeed", "srun"})
# The launchers started on every node: torchrun and accelerate launch.
PER_NODE = frozenset({"torchrun", "accelerate"})

_NAMES = {
    "mpirun": "mpirun",
    "mpiexec": "mpirun",
    "orterun": "mpirun",
    "prterun": "mpirun",
    "horovodrun": "horovodrun",
    "deepspeed": "deepspeed",
    "srun": "srun",
    "torchrun": "torchrun",
    "accelerate": "accelerate",
}
_MODULES = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate.commands.launch": "accelerate",
}

# Per launcher: option -> what it names (hosts, hostfile, include, master, endpoint, port,
# nodelist) or "" for an option that takes one value the doctor does not need.
_OPTIONS: dict[str, dict[str, str]] = {
    "mpirun": {
        **dict.fromkeys(("-H", "-host", "--host"), "hosts"),
        **dict.fromkeys(
            ("-hostfile", "--hostfile", "-machinefile", "--machinefile", "--default-hostfile"),
            "hostfile",
        ),
        **dict.fromkeys(
            (
                "-np",
                "-n",
                "-c",
                "--np",
                "-N",
                "-npernode",
                "--npernode",
                "--map-by",
                "-map-by",
                "--bind-to",
                "-bind-to",
                "--rank-by",
                "-x",
                "-wdir",
                "--wdir",
                "-prefix",
                "--prefix",
                "--output-filename",
                "-output-filename",
                "--timeout",
                "-timeout",
            ),
            "",
        ),
    },
    "horovodrun": {
        **dict.fromkeys(("-H", "--hosts"), "hosts"),
        **dict.fromkeys(("-hostfile", "--hostfile"), "hostfile"),
        **dict.fromkeys(
            (
                "-np",
                "--num-proc",
                "-p",
                "--ssh-port",
                "-i",
                "--ssh-identity-file",
                "--network-interface",
                "--output-filename",
                "--start-timeout",
                "--log-level",
                "--config-file",
                "--gloo-timeout-seconds",
            ),
            "",
        ),
    },
    "deepspeed": {
        **dict.fromkeys(("-H", "--hostfile"), "hostfile"),
        **dict.fromkeys(("-i", "--include"), "include"),
        **dict.fromkeys(("--master_addr", "--master-addr"), "master"),
        **dict.fromkeys(("--master_port", "--master-port"), "port"),
        **dict.fromkeys(
            (
                "-e",
                "--exclude",
                "--num_nodes",
                "--num_gpus",
                "--num-gpus",
                "--launcher",
                "--launcher_args",
                "--elastic_training",
                "--min_elastic_nodes",
                "--max_elastic_nodes",
                "--ssh_port",
                "--comment",
                "--venv_script",
            ),
            "",
        ),
    },
    "torchrun": {
        **dict.fromkeys(("--rdzv-endpoint", "--rdzv_endpoint"), "endpoint"),
        **dict.fromkeys(("--master-addr", "--master_addr"), "master"),
        **dict.fromkeys(("--master-port", "--master_port"), "port"),
        **dict.fromkeys(
            (
                "--nnodes",
                "--nproc-per-node",
                "--nproc_per_node",
                "--node-rank",
                "--node_rank",
                "--rdzv-backend",
                "--rdzv_backend",
                "--rdzv-id",
                "--rdzv_id",
                "--rdzv-conf",
                "--rdzv_conf",
                "--max-restarts",
                "--max_restarts",
                "--monitor-interval",
                "--monitor_interval",
                "--start-method",
                "--start_method",
                "--role",
                "--log-dir",
                "--log_dir",
                "-r",
                "--redirects",
                "-t",
                "--tee",
                "--local-ranks-filter",
                "--local_ranks_filter",
                "--logs-specs",
                "--logs_specs",
                "--local-addr",
                "--local_addr",
            ),
            "",
        ),
    },
    "accelerate": {
        "--main_process_ip": "master",
        "--main_process_port": "port",
        **dict.fromkeys(
            (
                "--num_machines",
                "--num_processes",
                "--machine_rank",
                "--config_file",
                "--mixed_precision",
                "--rdzv_backend",
                "--gpu_ids",
                "--num_cpu_threads_per_process",
                "--dynamo_backend",
                "--deepspeed_config_file",
                "--deepspeed_hostfile",
            ),
            "",
        ),
    },
    "srun": {
        **dict.fromkeys(("-w", "--nodelist"), "nodelist"),
        **dict.fromkeys(
            (
                "-N",
                "--nodes",
                "-n",
                "--ntasks",
                "-p",
                "--partition",
                "-t",
                "--time",
                "-J",
                "--job-name",
                "--export",
                "-c",
                "--cpus-per-task",
                "--gres",
                "--gpus",
                "--mpi",
                "--ntasks-per-node",
                "-o",
                "--output",
                "-e",
                "--error",
                "-A",
                "--account",
                "--mem",
                "-x",
                "--exclude",
                "--cpu-bind",
                "-D",
                "--chdir",
                "--container-image",
            ),
            "",
        ),
    },
}
# Options that take two values (Open MPI's --mca NAME VALUE).
_PAIRS = {"mpirun": frozenset({"--mca", "-mca", "--gmca", "-gmca"})}
DEEPSPEED_HOSTFILE = "/job/hostfile"  # DeepSpeed's default when --hostfile is not given


@dataclass(frozen=True)
class LaunchLine:
    """What a launch command says about where it runs."""

    argv: tuple[str, ...]
    tool: str = ""  # mpirun, horovodrun, deepspeed, srun, torchrun, accelerate; "" unknown
    at: int = 0  # index of the launcher's own word (``launch`` for accelerate)
    program: int = 0  # index of the first word after the launcher's options
    hosts: str | None = None  # host[:slots],... (the doctor's -H format)
    hostfile: Path | None = None
    nodelist: str | None = None  # SLURM nodes (srun -w)
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def spreads(self) -> bool:
        """It starts every node itself (or is unknown: run once, here, as the user would)."""
        return self.tool not in PER_NODE


def _tool(argv: list[str]) -> tuple[str, int]:
    """The launcher and the index of its last word (``python -m torch.distributed.run``)."""
    if not argv:
        return "", 0
    base = os.path.basename(argv[0])
    if base.startswith("python"):
        for i, word in enumerate(argv[1:-1], 1):
            if word == "-m":
                return _MODULES.get(argv[i + 1], ""), i + 1
            if not word.startswith("-"):
                break
        return "", 0
    tool = _NAMES.get(base, "")
    if tool == "accelerate":
        return ("accelerate", 1) if argv[1:2] == ["launch"] else ("", 0)
    return tool, 0


def _port(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and 0 < int(text) < 65536 else None


def _endpoint(text: str) -> tuple[str, int | None]:
    """``host:port`` / ``[v6]:port`` / ``host``."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, _port(rest.lstrip(":"))
    host, sep, port = text.rpartition(":")
    return (host, _port(port)) if sep and ":" not in host else (text, None)


def _include(text: str) -> str:
    """DeepSpeed's ``host1:0,1@host2`` -> ``host1,host2``."""
    return ",".join(part.split(":", 1)[0] for part in text.split("@") if part.strip())


def parse_launch(argv: list[str]) -> LaunchLine:
    """The launcher of ``argv`` and what its own options say about the nodes."""
    tool, at = _tool(argv)
    table = _OPTIONS.get(tool, {})
    pairs = _PAIRS.get(tool, frozenset())
    found: dict[str, str] = {}
    i = at + 1
    while i < len(argv) and tool:
        word = argv[i]
        if not word.startswith("-") or word == "--":
            i += word == "--"
            break
        name, eq, value = word.partition("=")
        if name in pairs:
            i += 3
            continue
        if name in table and not eq:
            value, i = (argv[i + 1] if i + 1 < len(argv) else ""), i + 1
        if table.get(name) and value and "{" not in value:  # {master_addr}: the doctor's
            found.setdefault(table[name], value)
        i += 1
    master = found.get("master")
    port = _port(found.get("port"))
    if "endpoint" in found:
        master, port = _endpoint(found["endpoint"])
    hostfile = found.get("hostfile")
    if tool == "deepspeed" and not hostfile and "include" not in found:
        hostfile = DEEPSPEED_HOSTFILE if os.path.isfile(DEEPSPEED_HOSTFILE) else None
    return LaunchLine(
        argv=tuple(argv),
        tool=tool,
        at=at,
        program=min(i, len(argv)),
        hosts=_include(found["include"]) if "include" in found else found.get("hosts"),
        hostfile=Path(hostfile) if hostfile else None,
        nodelist=found.get("nodelist"),
        master_addr=master or None,
        master_port=port,
    )


# The job's own collective timeout, where its command line sets it: Megatron-LM's
# --distributed-timeout-minutes, Hugging Face Trainer's --ddp_timeout (seconds).
_TIMEOUTS = {
    "--distributed-timeout-minutes": 60.0,
    "--distributed_timeout_minutes": 60.0,
    "--ddp_timeout": 1.0,
    "--ddp-timeout": 1.0,
}


def collective_timeout(argv: list[str] | tuple[str, ...]) -> tuple[float, str] | None:
    """Seconds after which the job's own watchdog ends a collective, and the option that says
    so, where the command line sets it."""
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name not in _TIMEOUTS:
            continue
        text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        try:
            seconds = float(text) * _TIMEOUTS[name]
        except ValueError:
            continue
        if seconds > 0:
            return seconds, f"{name} {text}"
    return None
