"""How each launcher that starts every node itself is given the environment to set there.

Nothing is rewritten silently: what comes back is the command actually run (printed before it
runs), the variables set in its own environment, and a file to write when the launcher reads
one. Pure, apart from reading the user's own .deepspeed_env to carry it over.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from doctor.core.files import read_bounded
from doctor.job.argv import LaunchLine

MCA = "OMPI_MCA_"


@dataclass(frozen=True)
class Forwarded:
    argv: list[str]
    env: dict[str, str]  # set in the launcher's own environment
    how: str  # one phrase: how the launcher passes it on
    files: dict[Path, str] = field(default_factory=dict)  # path -> text, written before launch


def _after_launcher(line: LaunchLine, words: list[str]) -> list[str]:
    argv = list(line.argv)
    return argv[: line.at + 1] + words + argv[line.at + 1 :]


MAX_ENV_FILE = 1 << 20  # bytes of a .deepspeed_env: NAME=VALUE lines


def _deepspeed_env(env: dict[str, str]) -> str:
    """DeepSpeed reads NAME=VALUE lines from ~/.deepspeed_env and ./.deepspeed_env, the file
    name taken from DS_ENV_FILE (an absolute path wins over both folders): the user's own lines
    are kept, ours after them."""
    lines: list[str] = []
    name = os.environ.get("DS_ENV_FILE", ".deepspeed_env")
    for folder in dict.fromkeys((os.path.expanduser("~"), os.getcwd())):
        path = Path(folder, name)
        with contextlib.suppress(OSError):  # none there (or no file): DeepSpeed reads on too
            text = read_bounded(path, MAX_ENV_FILE).decode(errors="replace")
            lines += [ln for ln in text.splitlines() if "=" in ln]
    lines += [f"{k}={v}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def forward(line: LaunchLine, env: dict[str, str], folder: Path) -> Forwarded:
    """The command to run once, here, so that ``env`` reaches every rank it starts."""
    if not env:
        return Forwarded(list(line.argv), {}, "nothing to pass")
    if line.tool == "mpirun":
        words: list[str] = []
        for name, value in env.items():
            if name.startswith(MCA):
                words += ["--mca", name[len(MCA) :], value]
            else:
                words += ["-x", f"{name}={value}"]
        return Forwarded(_after_launcher(line, words), {}, "mpirun -x / --mca")
    if line.tool == "srun":
        argv = list(line.argv)
        pairs = ",".join(f"{k}={v}" for k, v in env.items())
        for i in range(line.at + 1, line.program):
            # The user's --export stays, ours appended to it: srun reads only one.
            if argv[i].startswith("--export="):
                argv[i] = f"{argv[i]},{pairs}"
                return Forwarded(argv, {}, "srun --export")
            if argv[i] == "--export" and i + 1 < len(argv):
                argv[i + 1] = f"{argv[i + 1]},{pairs}"
                return Forwarded(argv, {}, "srun --export")
        return Forwarded(_after_launcher(line, [f"--export=ALL,{pairs}"]), {}, "srun --export")
    if line.tool == "deepspeed":
        path = folder / "deepspeed_env"
        return Forwarded(
            list(line.argv),
            {"DS_ENV_FILE": str(path)},
            f"DeepSpeed's env file ({path})",
            {path: _deepspeed_env(env)},
        )
    # horovodrun passes the launcher's environment on to every rank (so does an unknown
    # command run here, a script that launches the job itself).
    what = "horovodrun's environment" if line.tool == "horovodrun" else "its environment"
    return Forwarded(list(line.argv), dict(env), what)
