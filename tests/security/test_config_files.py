"""A config file in the working directory is someone else's until its modes say otherwise.

A project folder on a shared filesystem is often group-writable: anyone in the group could plant
doctor.toml or a pyproject.toml table that runs a program (python, exec, recommend), reaches nodes
another way (ssh-config's Match exec, launcher), writes files (the reports, logs) or weakens a check
(accept-new-host-keys). Those settings are taken from it only when the file and its folder are the
user's (or root's) and writable by no one else; every run says which file it read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from builders import MIB, run_cli, write_captures

from doctor.cli.app import app
from doctor.cli.config import GUARDED, config_options, distrust, load_config, take_config_flag
from doctor.core.errors import UsageError

NOBODY = 65534


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private working folder (0700) holding one node's captures."""
    folder = tmp_path / "project"
    folder.mkdir(mode=0o700)
    monkeypatch.chdir(folder)
    write_captures(folder / "captures", {"gpu01": 512 * MIB})
    return folder


def _plant(folder: Path, text: str, *, name: str = "doctor.toml", mode: int = 0o664) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_group_writable_file_cannot_write_reports(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = _plant(here, 'json = "victim.json"\nfail-on = "warn"\n')
    rc, _, err = run_cli(["analyze", "captures", "--select", "shm"], capsys)
    assert not (here / "victim.json").exists()
    assert rc == 1  # what is not guarded still applies: fail-on = warn
    read, ignored = err.splitlines()[:2]
    assert read == f"doctor: config: read {planted}"
    assert "ignored json from" in ignored and "writable by its group or by others" in ignored
    planted.chmod(0o644)  # the user's own, writable by no one else: trusted
    rc, _, err = run_cli(["analyze", "captures", "--select", "shm"], capsys)
    assert json.loads((here / "victim.json").read_text())["command"] == "analyze"
    assert "ignored" not in err


def test_a_group_writable_folder_is_not_trusted(here: Path) -> None:
    planted = _plant(here, 'python = "/bin/false"\n', mode=0o644)
    assert distrust(planted) == ""
    here.chmod(0o775)
    assert distrust(planted) == f"{here} is writable by its group or by others"
    config = load_config(here)
    assert config is not None and config.table == {} and config.ignored == ("python",)


def test_a_file_of_another_user_is_not_trusted(here: Path) -> None:
    planted = _plant(here, '[preflight]\nexec = "sh -c id {node}"\nhosts = "a,b"\n', mode=0o644)
    os.chown(planted, NOBODY, NOBODY)
    config = load_config(here)
    assert config is not None
    assert config.table == {"preflight": {"hosts": "a,b"}}
    assert config.ignored == ("[preflight] exec",)
    assert f"owned by uid {NOBODY}" in config.distrust


def test_a_symlink_is_judged_by_the_file_it_names(here: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # world-writable, as /tmp or a group project folder
    target = _plant(shared, 'launcher = "srun"\n', mode=0o644)
    (here / "doctor.toml").symlink_to(target)
    config = load_config(here)
    assert config is not None and config.ignored == ("launcher",)
    assert str(shared) in config.distrust


def test_pyproject_table_is_guarded_too(here: Path) -> None:
    _plant(
        here,
        '[tool.cluster-doctor]\nexec = "sh -c \'id\' {node}"\nhosts = "n1"\n'
        '[tool.cluster-doctor.run]\nlogs = "/etc"\nspares = 1\n',
        name="pyproject.toml",
    )
    config = load_config(here)
    assert config is not None and config.path.name == "pyproject.toml"
    assert config.table == {"hosts": "n1", "run": {"spares": 1}}
    assert config.ignored == ("[run] logs", "exec")


def test_a_file_named_with_config_is_trusted_as_the_command_line(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = _plant(here, 'markdown = "report.md"\n', name="team.toml", mode=0o666)
    rc, _, err = run_cli(["--config", str(named), "analyze", "captures"], capsys)
    assert rc == 0 and (here / "report.md").read_text().startswith("# cluster-doctor")
    assert err.splitlines()[0] == f"doctor: config: read {named}"
    rc, _, err = run_cli(["analyze", "captures", "--config", str(here / "absent.toml")], capsys)
    assert rc == 2 and "--config" in err and "absent.toml" in err


def test_the_notice_is_said_under_quiet_too(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted = _plant(here, 'select = ["shm"]\n', mode=0o644)
    rc, _, err = run_cli(["--quiet", "analyze", "captures"], capsys)
    assert rc == 0 and err.splitlines() == [f"doctor: config: read {planted}"]
    planted.unlink()
    rc, _, err = run_cli(["--quiet", "analyze", "captures"], capsys)
    assert rc == 0 and "config" not in err


def test_config_after_the_double_dash_is_the_jobs() -> None:
    assert take_config_flag(["run", "-H", "a", "--", "train.py", "--config", "x.toml"]) == (
        None,
        ["run", "-H", "a", "--", "train.py", "--config", "x.toml"],
    )
    assert take_config_flag(["--config=a.toml", "preflight"]) == (Path("a.toml"), ["preflight"])
    with pytest.raises(UsageError, match="--config needs a file"):
        take_config_flag(["preflight", "--config"])


def test_every_guarded_setting_is_an_option() -> None:
    """A guarded key that names no option (a typo, a renamed flag) would guard nothing."""
    options = config_options(typer.main.get_command(app))
    assert set(GUARDED) <= options
    # The options that run a program, reach nodes, write a file or weaken a check: all guarded.
    dangerous = {"python", "exec", "recommend", "launcher", "ssh-config", "identity"}
    dangerous |= {"known-hosts", "accept-new-host-keys", "json", "junit", "markdown", "html"}
    dangerous |= {"healthy-hosts", "failed-hosts", "save-raw", "logs", "force"}
    assert dangerous <= set(GUARDED)


def test_a_planted_python_does_not_run(here: Path) -> None:
    """The reproduction: a bare `doctor preflight` in a folder holding a group-writable
    doctor.toml whose python is a script. Run as a user would, in a process of its own."""
    marker = here / "ran"
    evil = here / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    planted = _plant(here, f'python = "{evil}"\n')
    argv = [sys.executable, "-m", "doctor", "preflight", "--local", "--select", "shm"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert not marker.exists()
    assert f"ignored python from {planted}" in proc.stderr
