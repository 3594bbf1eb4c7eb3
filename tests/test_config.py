"""Defaults from doctor.toml / pyproject.toml: flags win over the file, the file over defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from builders import MIB, run_cli, write_captures

from doctor.cli.app import app
from doctor.cli.config import default_map, find_config
from doctor.core.errors import UsageError


@pytest.fixture
def captures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with one node whose /dev/shm is 512 MiB (a warn finding); cwd is tmp_path."""
    monkeypatch.chdir(tmp_path)
    return write_captures(tmp_path / "captures", {"gpu01": 512 * MIB})


def test_fail_on_precedence(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["analyze", str(captures), "--select", "shm"]
    assert run_cli(argv, capsys)[0] == 0  # built-in default: fail
    Path("doctor.toml").write_text('fail-on = "warn"\n')
    assert run_cli(argv, capsys)[0] == 1  # the file beats the default
    assert run_cli([*argv, "--fail-on", "fail"], capsys)[0] == 0  # the flag wins


def test_command_table_beats_top_level(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("doctor.toml").write_text(
        'fail-on = "warn"\nformat = "json"\nselect = ["shm", "node"]\n'
        '[analyze]\nfail-on = "fail"\nexclude = ["node"]\n'
    )
    rc, out, _ = run_cli(["analyze", str(captures)], capsys)
    assert rc == 0
    assert [o["check"] for o in json.loads(out)["outcomes"]] == ["shm.size"]
    rc, out, _ = run_cli(["analyze", str(captures), "--format", "text"], capsys)
    assert out.startswith("cluster-doctor analyze")


def test_pyproject_table_is_read(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.cluster-doctor]\nquiet = true\n'
    )
    rc, out, _ = run_cli(["analyze", str(captures), "--select", "node"], capsys)
    assert (rc, out) == (0, "")  # quiet and clean: nothing to say


def test_doctor_toml_wins_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cluster-doctor]\nfail-on = "warn"\n')
    assert find_config(tmp_path) == (tmp_path / "pyproject.toml", {"fail-on": "warn"})
    (tmp_path / "doctor.toml").write_text('fail-on = "fail"\n')
    assert find_config(tmp_path) == (tmp_path / "doctor.toml", {"fail-on": "fail"})
    (tmp_path / "doctor.toml").unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config(tmp_path) is None


def test_default_map_reaches_every_command_with_the_option() -> None:
    root = typer.main.get_command(app)
    mapping = default_map(root, {"deadline": 5, "select": ["shm"], "verbose": True}, Path("x"))
    assert mapping["verbose"] is True
    assert mapping["preflight"]["deadline"] == 5 and mapping["preflight"]["include"] == ["shm"]
    assert mapping["analyze"] == {"include": ["shm"]}
    assert mapping["checks"]["list"] == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fail_onn = 'warn'\n", "unknown setting 'fail_onn'"),
        ("[preflght]\n", r"unknown setting '\[preflght\]'"),
        ("[analyze]\ndeadline = 3\n", "unknown setting 'deadline'"),
        ("fail-on = \n", "not valid TOML"),
    ],
)
def test_bad_config_is_a_one_line_usage_error(
    captures: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    Path("doctor.toml").write_text(text)
    rc, _, err = run_cli(["analyze", str(captures)], capsys)
    assert rc == 2
    *notice, error = err.strip().splitlines()  # the file read (when it is TOML), what is wrong
    assert notice in ([], [f"doctor: config: read {Path.cwd() / 'doctor.toml'}"])
    assert error.startswith("doctor: error: ")
    with pytest.raises(UsageError, match=message):
        found = find_config(Path.cwd())
        assert found is not None
        default_map(typer.main.get_command(app), found[1], found[0])


def test_a_wrongly_typed_setting_is_a_usage_error(
    captures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("doctor.toml").write_text('[preflight]\ndeadline = "soon"\n')
    rc, _, err = run_cli(["preflight"], capsys)
    assert rc == 2 and "deadline" in err
