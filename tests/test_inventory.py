"""Inventory grammars: -H, hostfiles, SLURM, ssh_config; bad or duplicate entries name the line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import paramiko
import pytest
from hypothesis import given
from hypothesis import strategies as st

from doctor.core.errors import UsageError
from doctor.nodes.inventory import (
    Node,
    build_inventory,
    parse_hostfile_text,
    parse_hosts_arg,
    resolve,
    slurm_entries,
)

NO_CONFIG = paramiko.SSHConfig()


def nodes(entries, config=NO_CONFIG, port=None):
    return [
        (n.name, n.address, n.port, n.user, n.slots) for n in resolve(entries, config, port=port)
    ]


def test_hosts_arg_horovod_style():
    got = nodes(parse_hosts_arg("a:8, root@b:4,c,d:2222:8,[fe80::1]:2"))
    assert got == [
        ("a", "a", 22, None, 8),
        ("b", "b", 22, "root", 4),
        ("c", "c", 22, None, None),
        ("d", "d", 2222, None, 8),
        ("fe80::1", "fe80::1", 22, None, 2),
    ]


def test_hostfile_mpi_deepspeed_horovod_and_comments():
    text = """
# training hosts
worker-1 slots=8      # MPI / DeepSpeed
admin@worker-2:2222 slots=8 max_slots=16
worker-3:4            # Horovod
worker-4
"""
    got = nodes(parse_hostfile_text(text, "hosts"))
    assert got == [
        ("worker-1", "worker-1", 22, None, 8),
        ("worker-2", "worker-2", 2222, "admin", 8),
        ("worker-3", "worker-3", 22, None, 4),
        ("worker-4", "worker-4", 22, None, None),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a slots=8\nb slots=x\n", "line 2 of hosts: cannot read 'slots=x'"),
        ("a slots=8\nb cpus=4\n", "line 2 of hosts: cannot read 'cpus=4'"),
        ("a\n\n# c\nbad!host\n", "line 4 of hosts: cannot read host 'bad!host'"),
        ("a:1:2 slots=3\n", "line 1 of hosts: 'a:1:2' has two numbers"),
        ("a:0\n", "line 1 of hosts: slots 0 is out of range"),
        ("a:70000 slots=1\n", "line 1 of hosts: port 70000 is out of range"),
        ("# only comments\n", "hosts: no hosts in it"),
    ],
)
def test_hostfile_errors_name_the_line(text, message):
    with pytest.raises(UsageError, match="^" + __import__("re").escape(message)):
        parse_hostfile_text(text, "hosts")


def test_duplicates_name_both_lines():
    with pytest.raises(UsageError, match=r"line 3 of hosts: duplicate host 'a' \(first at line 1"):
        resolve(parse_hostfile_text("a\nb\na slots=2\n", "hosts"), NO_CONFIG)
    config = paramiko.SSHConfig.from_text("Host b\n  HostName a\n")
    with pytest.raises(UsageError, match=r"-H entry 2 .*'b' is the same host as -H entry 1"):
        resolve(parse_hosts_arg("a,b"), config)


def test_hosts_arg_errors():
    with pytest.raises(UsageError, match="-H entry 2: empty host name"):
        parse_hosts_arg("a,,b")
    with pytest.raises(UsageError, match=r"-H entry 1 .*cannot read host"):
        parse_hosts_arg("a b")


def test_ssh_config_aliases_apply_and_explicit_values_win():
    config = paramiko.SSHConfig.from_text(
        "Host gpu*\n  HostName %h.cluster.example\n  Port 2200\n  User train\n"
        "  IdentityFile /keys/id_train\n  UserKnownHostsFile /keys/kh\n  ProxyJump bastion:2222\n"
    )
    [a, b] = resolve(parse_hostfile_text("gpu1 slots=8\nops@gpu2:22 slots=8\n", "f"), config)
    assert (a.address, a.port, a.user) == ("gpu1.cluster.example", 2200, "train")
    assert a.identity_files == ("/keys/id_train",) and a.known_hosts == ("/keys/kh",)
    assert a.proxy_jump == "bastion:2222"
    assert Node.parse_jump(a.proxy_jump) == Node("bastion", "bastion", 2222, None)
    assert (b.port, b.user) == (22, "ops")


def test_ssh_port_is_the_last_resort():
    config = paramiko.SSHConfig.from_text("Host a\n  Port 2200\n")
    got = nodes(parse_hosts_arg("a,b"), config, port=2022)
    assert [(n, p) for n, _, p, _, _ in got] == [("a", 2200), ("b", 2022)]


def test_slurm_nodelist_and_tasks():
    env = {"SLURM_JOB_NODELIST": "gpu[01-03],login", "SLURM_TASKS_PER_NODE": "8(x3),1"}
    got = nodes(slurm_entries(env))
    assert got == [
        ("gpu01", "gpu01", 22, None, 8),
        ("gpu02", "gpu02", 22, None, 8),
        ("gpu03", "gpu03", 22, None, 8),
        ("login", "login", 22, None, 1),
    ]
    with pytest.raises(UsageError, match="gives 1 nodes, SLURM_JOB_NODELIST has 4"):
        slurm_entries({**env, "SLURM_TASKS_PER_NODE": "8"})
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST="):
        slurm_entries({"SLURM_JOB_NODELIST": "gpu[01-"})
    with pytest.raises(UsageError, match="not set"):
        slurm_entries({})


def test_build_inventory_sources(tmp_path: Path):
    assert [n.local for n in build_inventory(env={})] == [True]
    assert [n.name for n in build_inventory(env={"SLURM_JOB_NODELIST": "n[1-2]"})] == ["n1", "n2"]
    with pytest.raises(UsageError, match="only one of"):
        build_inventory(hosts="a", slurm=True, env={})
    with pytest.raises(UsageError, match=r"--hostfile .*missing"):
        build_inventory(hostfile=tmp_path / "missing", env={})
    with pytest.raises(UsageError, match="--ssh-config"):
        build_inventory(hosts="a", ssh_config=tmp_path / "nope", env={})


# Run in a fresh interpreter: whether invoke gets imported depends on what came in before.
PARAMIKO_WITHOUT_INVOKE = """
import sys
from pathlib import Path
from doctor.nodes.inventory import load_ssh_config
folder = Path(sys.argv[1])
(folder / "plain").write_text("Host a\\n  HostName 10.0.0.1\\n")
(folder / "exec").write_text('Match exec "test 1 = 1"\\n  HostName 10.0.0.2\\n')
plain = load_ssh_config(folder / "plain").lookup("a")["hostname"]
print(plain, "invoke" in sys.modules)
matched = load_ssh_config(folder / "exec").lookup("b")["hostname"]
print(matched, "invoke" in sys.modules)
"""


def test_ssh_config_without_match_exec_is_read_without_invoke(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-c", PARAMIKO_WITHOUT_INVOKE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    # The second config's Match exec runs (through invoke) although paramiko came in without it.
    assert proc.stdout.split("\n")[:2] == ["10.0.0.1 False", "10.0.0.2 True"]


# -- properties --------------------------------------------------------------------------------
label = st.text("abcxyz019", min_size=1, max_size=8).map(lambda s: "h" + s)
hostnames = st.lists(label, min_size=1, max_size=3).map(".".join)
users = st.none() | st.text("abz_09", max_size=6).map(lambda s: "u" + s)
slots = st.none() | st.integers(1, 512)
ports = st.none() | st.integers(1, 65535)


@given(
    st.lists(
        st.tuples(hostnames, users, ports, slots), min_size=1, max_size=8, unique_by=lambda e: e[0]
    )
)
def test_mpi_hostfile_round_trip(entries):
    # Without slots=, "host:N" is Horovod's slot count, so a port is only written with slots=.
    entries = [(h, u, p if n else None, n) for h, u, p, n in entries]
    lines = []
    for host, user, port, n in entries:
        target = (f"{user}@" if user else "") + host + (f":{port}" if port else "")
        lines.append(target + (f" slots={n}" if n else "") + "  # comment")
    got = parse_hostfile_text("\n".join(lines), "f")
    assert [(e.host, e.user, e.port, e.slots) for e in got] == entries


@given(
    st.lists(st.tuples(hostnames, users, slots), min_size=1, max_size=8, unique_by=lambda e: e[0])
)
def test_hosts_arg_round_trip(entries):
    text = ",".join((f"{u}@" if u else "") + h + (f":{n}" if n else "") for h, u, n in entries)
    got = parse_hosts_arg(text)
    assert [(e.host, e.user, e.slots) for e in got] == list(entries)


@given(st.text(max_size=60))
def test_garbage_hostfile_never_crashes(text):
    try:
        entries = parse_hostfile_text(text, "f")
    except UsageError as exc:
        assert str(exc).startswith(("line ", "f:"))
    else:
        assert entries
