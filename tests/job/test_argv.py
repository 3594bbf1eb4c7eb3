"""Launch command lines: which launcher, which nodes, where they meet, how the env is passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.job.argv import parse_launch
from doctor.job.command import fill, stages_for, targets_for
from doctor.job.forward import forward
from doctor.nodes.targets import Targets
from doctor.pipeline.request import Profile, StageSettings
from doctor.stages.pairs import Sampling


@pytest.mark.parametrize(
    ("argv", "tool", "hosts", "master", "port"),
    [
        (["mpirun", "-np", "4", "--mca", "btl", "tcp,self", "-H", "a:2,b:2", "./app", "-H", "x"],
         "mpirun", "a:2,b:2", None, None),
        (["/usr/bin/mpiexec", "--host=a,b", "python", "t.py"], "mpirun", "a,b", None, None),
        (["horovodrun", "-np", "8", "-H", "g1:4,g2:4", "python", "t.py"],
         "horovodrun", "g1:4,g2:4", None, None),
        (["deepspeed", "--include", "w0:0,1@w1", "--master_port", "29600", "t.py"],
         "deepspeed", "w0,w1", None, 29600),
        (["torchrun", "--nnodes=2", "--rdzv-endpoint", "head:29400", "t.py", "--master-addr", "x"],
         "torchrun", None, "head", 29400),
        (["torchrun", "--rdzv_endpoint=[fd00::1]:29400", "t.py"],
         "torchrun", None, "fd00::1", 29400),
        (["python3", "-u", "-m", "torch.distributed.run", "--master_addr", "n1", "t.py"],
         "torchrun", None, "n1", None),
        (["accelerate", "launch", "--main_process_ip", "10.0.0.1", "--main_process_port=1234",
          "t.py"], "accelerate", None, "10.0.0.1", 1234),
        (["torchrun", "--master-addr", "{master_addr}", "t.py"], "torchrun", None, None, None),
        (["python3", "train.py", "-H", "a,b"], "", None, None, None),
        (["accelerate", "config"], "", None, None, None),
        ([], "", None, None, None),
    ],
)  # fmt: skip
def test_launcher_and_its_nodes(
    argv: list[str], tool: str, hosts: str | None, master: str | None, port: int | None
) -> None:
    line = parse_launch(argv)
    assert (line.tool, line.hosts, line.master_addr, line.master_port) == (
        tool, hosts, master, port
    )  # fmt: skip


def test_hostfiles_and_slurm_nodelists() -> None:
    assert parse_launch(["mpirun", "--hostfile", "hf", "a.out"]).hostfile == Path("hf")
    assert parse_launch(["deepspeed", "-H", "/tmp/hf", "t.py"]).hostfile == Path("/tmp/hf")
    assert parse_launch(["horovodrun", "--hostfile=h", "t.py"]).hostfile == Path("h")
    assert parse_launch(["srun", "-N", "2", "-w", "gpu[01-02]", "t"]).nodelist == "gpu[01-02]"
    assert parse_launch(["srun", "--nodelist=gpu[1-4]", "t"]).nodelist == "gpu[1-4]"


def test_shapes() -> None:
    assert parse_launch(["mpirun", "a.out"]).spreads
    assert parse_launch(["./job.sh"]).spreads  # unknown: run once, here
    assert not parse_launch(["torchrun", "t.py"]).spreads
    assert not parse_launch(["accelerate", "launch", "t.py"]).spreads


def test_the_doctors_own_options_override_the_command() -> None:
    line = parse_launch(["mpirun", "-H", "a,b", "x"])
    assert targets_for(Targets(), line).hosts == "a,b"
    assert targets_for(Targets(hosts="c,d"), line).hosts == "c,d"
    assert targets_for(Targets(local=True), line).hosts is None
    files = parse_launch(["mpirun", "--hostfile", "hf", "x"])
    assert targets_for(Targets(), files).hostfile == Path("hf")
    slurm = parse_launch(["srun", "-w", "n[1-2]", "x"])
    assert targets_for(Targets(), slurm).slurm_nodes == "n[1-2]"
    torch = parse_launch(["torchrun", "--master-addr", "n1", "t.py"])
    assert stages_for(StageSettings(), Profile.full, torch).master == "n1"
    assert stages_for(StageSettings(master="m"), Profile.full, torch).master == "m"


def test_quick_profile_drops_the_ssh_mesh_only_where_the_launch_needs_no_ssh() -> None:
    torch = parse_launch(["torchrun", "t.py"])
    mpi = parse_launch(["mpirun", "x"])
    assert stages_for(StageSettings(), Profile.quick, torch).mesh_mode is Sampling.off
    assert stages_for(StageSettings(), Profile.quick, mpi).mesh_mode is Sampling.auto
    assert stages_for(StageSettings(), Profile.full, torch).mesh_mode is Sampling.auto
    script = parse_launch(["./launch.sh"])  # it may well ssh: the mesh stays
    assert stages_for(StageSettings(), Profile.quick, script).mesh_mode is Sampling.auto


def test_placeholders_are_filled_and_other_braces_kept() -> None:
    values = {"node": "n2", "node_rank": "1", "nnodes": "3", "master_addr": "n1"}
    values["master_port"] = "29500"
    argv = ["--rdzv-endpoint={master_addr}:{master_port}", "{node_rank}/{nnodes}", "{x}", "{node}"]
    assert fill(argv, values) == ["--rdzv-endpoint=n1:29500", "1/3", "{x}", "n2"]


ENV = {"GLOO_SOCKET_IFNAME": "eth0", "OMPI_MCA_btl_tcp_if_include": "10.0.0.0/24"}


def test_mpirun_gets_x_and_mca_right_after_the_launcher(tmp_path: Path) -> None:
    done = forward(parse_launch(["mpirun", "-np", "2", "a.out"]), ENV, tmp_path)
    assert done.argv == [
        "mpirun", "-x", "GLOO_SOCKET_IFNAME=eth0", "--mca", "btl_tcp_if_include", "10.0.0.0/24",
        "-np", "2", "a.out",
    ]  # fmt: skip
    assert done.env == {}


def test_srun_gets_export_and_keeps_the_users(tmp_path: Path) -> None:
    plain = forward(parse_launch(["srun", "-N", "2", "t"]), {"A": "1"}, tmp_path)
    assert plain.argv == ["srun", "--export=ALL,A=1", "-N", "2", "t"]
    theirs = forward(parse_launch(["srun", "--export=ALL,B=2", "t"]), {"A": "1"}, tmp_path)
    assert theirs.argv == ["srun", "--export=ALL,B=2,A=1", "t"]
    spaced = forward(parse_launch(["srun", "--export", "ALL", "-N2", "t"]), {"A": "1"}, tmp_path)
    assert spaced.argv == ["srun", "--export", "ALL,A=1", "-N2", "t"]


def test_deepspeed_gets_an_env_file_with_the_users_lines_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".deepspeed_env").write_text("MINE=1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DS_ENV_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    done = forward(parse_launch(["deepspeed", "t.py"]), {"A": "1"}, tmp_path / "run")
    path = tmp_path / "run" / "deepspeed_env"
    assert done.argv == ["deepspeed", "t.py"] and done.env == {"DS_ENV_FILE": str(path)}
    assert done.files == {path: "MINE=1\nA=1\n"}


def test_horovodrun_and_unknown_commands_get_it_in_their_environment(tmp_path: Path) -> None:
    for argv in (["horovodrun", "-np", "2", "t.py"], ["./launch.sh"]):
        done = forward(parse_launch(argv), {"A": "1"}, tmp_path)
        assert done.argv == argv and done.env == {"A": "1"}


def test_the_jobs_own_collective_timeout_is_read_from_its_command_line() -> None:
    from doctor.job.argv import collective_timeout

    megatron = ["torchrun", "pretrain_gpt.py", "--distributed-timeout-minutes", "5"]
    assert collective_timeout(megatron) == (300.0, "--distributed-timeout-minutes 5")
    assert collective_timeout(["python", "train.py", "--ddp_timeout=120"]) == (
        120.0,
        "--ddp_timeout 120",
    )
    assert collective_timeout(["python", "train.py", "--ddp_timeout", "soon"]) is None
    assert collective_timeout(["python", "train.py", "--ddp_timeout"]) is None
    assert collective_timeout(["torchrun", "train.py", "--timeout", "5"]) is None
