"""What users type: -H lists, hostfiles, SLURM nodelists and task counts, TOML config. Each
answers with well-formed entries or one UsageError line, never another exception."""

from __future__ import annotations

from pathlib import Path

import typer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from doctor.cli.app import app
from doctor.cli.config import load_config
from doctor.core.errors import UsageError
from doctor.nodes.inventory import parse_hostfile_text, parse_hosts_arg, slurm_entries
from tests.properties.counting import counted
from tests.properties.strategies import any_text

HOST_PIECES = ["node1", "gpu-a", "a", "b", "root@", "user@", ":", ":8", ":22:4", ",", "[", "]",
               "::1", "[fe80::1]", "10.0.0.1", ".", "-", "_", "%eth0"]  # fmt: skip
HOSTFILE_PIECES = [*HOST_PIECES, "slots=", "slots=4", "max_slots=8", "max-slots=2", " ", "\n",
                   "# comment", "slots=0", "slots=-1", "=", "host:2"]  # fmt: skip
NODELIST_PIECES = ["node", "gpu", "[", "]", "-", ",", "0", "1", "01-16", "1-3,5", "a[1-2]", "^"]
TASKS_PIECES = ["1", "2", "(x", ")", ",", "(x3)", "8(x2)", "x", "0"]
TOML_PIECES = ["[preflight]", "[tool.cluster-doctor]", "deadline", " = ", "40", '"x"', "true",
               "\n", "[", "]", "fail-on", "{", "}", "'", "=", "[[a]]", "1e400", "-"]  # fmt: skip


def one_line(exc: UsageError) -> None:
    text = str(exc)
    assert text and "\n" not in text, repr(text)


def well_formed(entries: list) -> None:
    for e in entries:
        assert isinstance(e.host, str) and e.host
        assert e.port is None or 1 <= e.port <= 65535
        assert e.slots is None or 1 <= e.slots <= 1 << 16


@settings(max_examples=300, deadline=None)
@given(any_text(HOST_PIECES))
@counted("-H host list")
def test_hosts_arg(text: str) -> None:
    try:
        well_formed(parse_hosts_arg(text))
    except UsageError as exc:
        one_line(exc)


@settings(max_examples=300, deadline=None)
@given(any_text(HOSTFILE_PIECES))
@counted("hostfile")
def test_hostfile(text: str) -> None:
    try:
        entries = parse_hostfile_text(text, "hosts")
        assert entries
        well_formed(entries)
    except UsageError as exc:
        one_line(exc)


@settings(max_examples=300, deadline=None)
@given(any_text(NODELIST_PIECES), st.one_of(st.none(), any_text(TASKS_PIECES)))
@example("n1", "0")  # a node given no slots, or more than any other source allows: usage errors
@example("n1", "111000")
@counted("SLURM nodelist and tasks per node")
def test_slurm_nodelist(nodelist: str, tasks: str | None) -> None:
    env = {"SLURM_JOB_NODELIST": nodelist}
    if tasks is not None:
        env["SLURM_TASKS_PER_NODE"] = tasks
    try:
        entries = slurm_entries(env)
        well_formed(entries)
    except UsageError as exc:
        one_line(exc)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        any_text(TOML_PIECES).map(lambda t: t.encode("utf-8", "surrogateescape")),
        st.binary(max_size=200),
    ),
    st.sampled_from(["doctor.toml", "pyproject.toml"]),
)
@example(b"\x80", "doctor.toml")  # not UTF-8: tomllib raises UnicodeDecodeError
@counted("TOML config")
def test_config(tmp_path: Path, data: bytes, name: str) -> None:
    (tmp_path / name).write_bytes(data)
    try:
        config = load_config(tmp_path)
        assert config is None or isinstance(config.defaults(typer.main.get_command(app)), dict)
    except UsageError as exc:
        one_line(exc)
