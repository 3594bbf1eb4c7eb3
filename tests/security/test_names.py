"""A node's name reaches ssh's argv, file names and printed commands: whatever its source, a name
that is not a host name (RFC 1123 with '_') or an address is refused where it is read.

Sources: -H, hostfiles, SLURM_JOB_NODELIST, ssh_config (HostName, ProxyJump), SLURM's own
expansion (--slurm-nodes, --partition), --master-addr and MASTER_ADDR, `analyze`'s NODE=FILE and
--node. A saved capture's file name is made a name (never refused: the file is the user's).
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from builders import MIB, run_cli, write_captures
from hypothesis import given
from hypothesis import strategies as st

from doctor.core.errors import UsageError
from doctor.core.files import inside
from doctor.core.nodeset import as_host, host_problem
from doctor.nodes.inventory import build_inventory, load_ssh_config, parse_hostfile_text, resolve
from doctor.nodes.transport.srun import slurm_nodes
from doctor.paste import read_inputs
from doctor.stages import mesh_agent

HOSTILE = (
    "-oProxyCommand=touch /tmp/pwned",
    "../../../../tmp/x",
    "a';id;echo '",
    "a;id",
    "$(id)",
    "`id`",
    "a b",
    "a\nb",
    "a\x1b]0;t\x07",
    "-H",
    "a/b",
    "a|b",
    "..",
)


@pytest.mark.parametrize("name", HOSTILE)
def test_every_source_refuses_it(name: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        build_inventory(hosts=name)
    if "\n" not in name:  # a hostfile's lines are its entries
        with pytest.raises(UsageError):
            parse_hostfile_text(f"{name} slots=1\n", "hosts.txt")
    with pytest.raises(UsageError):
        build_inventory(slurm=True, env={"SLURM_JOB_NODELIST": name})


def test_slurm_nodelist_reproduction() -> None:
    """The reported case: `doctor run --slurm` put a rank's log outside --logs, and a name
    '-oProxyCommand=...' was taken as a node."""
    for nodelist in ("../../../../tmp/x", "node1,-oProxyCommand=touch /tmp/x"):
        with pytest.raises(UsageError, match="SLURM_JOB_NODELIST"):
            build_inventory(slurm=True, env={"SLURM_JOB_NODELIST": nodelist})
    nodes = build_inventory(slurm=True, env={"SLURM_JOB_NODELIST": "gpu[01-02],gpu_x.lab"})
    assert [n.name for n in nodes] == ["gpu01", "gpu02", "gpu_x.lab"]


def test_ssh_config_hostname_and_proxyjump_are_checked(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host a\n  HostName -oProxyCommand=id\nHost b\n  ProxyJump -oX=y\n")
    parsed = load_ssh_config(config)
    for host in ("a", "b"):
        with pytest.raises(UsageError, match=f"ssh config for {host}|ProxyJump"):
            resolve(parse_hostfile_text(f"{host}\n", "h"), parsed)


def test_slurms_own_expansion_is_checked() -> None:
    """scontrol prints what it is given when it holds no range: the names are checked after."""
    with pytest.raises(UsageError):
        slurm_nodes("-oProxyCommand=id", None, {})
    with pytest.raises(UsageError, match="SLURM"):
        slurm_nodes("a;id", None, {})


@pytest.mark.parametrize("flag", ["--master-addr"])
def test_master_addr(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["preflight", "--local", flag, "a;id", "--select", "shm"], capsys)
    assert rc == 2 and "--master-addr" in err


def test_master_addr_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASTER_ADDR", "$(id)")
    rc, _, err = run_cli(["preflight", "-H", "n1,n2", "--select", "shm"], capsys)
    assert rc == 2 and "MASTER_ADDR" in err


def test_analyze_names(tmp_path: Path) -> None:
    folder = write_captures(tmp_path / "caps", {"gpu01": 512 * MIB})
    odd = folder / "gpu01.json"
    renamed = odd.rename(folder / "a;id $(x).json")
    assert list(read_inputs([str(folder)])) == ["a-id-x"]
    with pytest.raises(UsageError, match="NODE=FILE"):
        read_inputs([f"a:b={renamed}"])  # NODE=FILE's shape, not a host name
    with pytest.raises(UsageError):
        read_inputs([f"a;id={renamed}"])  # not NODE=FILE's shape: a file that is not there
    with pytest.raises(UsageError, match="--node"):
        read_inputs(["-"], stdin_node="../x", stdin=None)


def test_ssh_reads_the_name_as_a_destination(tmp_path: Path) -> None:
    """The mesh agent's real ssh, given a name that is an option: '--' keeps it a destination
    (which does not resolve), so its ProxyCommand never runs."""
    marker = tmp_path / "ran"
    target = {"name": "x", "host": f"-oProxyCommand=touch {marker}"}
    entry = mesh_agent.attempt(target, {"connect_timeout": 3, "grace": 5})
    assert entry["argv"][-3:] == ["--", target["host"], "true"]
    assert entry.get("rc") == 255 and not marker.exists()


def test_file_names_stay_in_their_folder(tmp_path: Path) -> None:
    assert inside(tmp_path, "node1", ".log") == tmp_path / "node1.log"
    for name in ("../x", "a/b", "..", ""):
        with pytest.raises(ValueError):
            inside(tmp_path, name, ".log")


NAME_CHARS = string.ascii_letters + string.digits + "-_.:%/;$`'\" \n\x1b|&<>()*?[]{}!#~"


@given(st.text(alphabet=NAME_CHARS, max_size=40))
def test_an_accepted_name_holds_nothing_a_shell_or_a_path_reads(name: str) -> None:
    if host_problem(name) is None:
        assert set(name) <= set(string.ascii_letters + string.digits + "-_.:%")
        assert not name.startswith(("-", ".")) and "/" not in name and ".." not in name


@given(st.text(max_size=40))
def test_a_file_name_always_makes_a_name(stem: str) -> None:
    assert host_problem(as_host(stem)) is None
