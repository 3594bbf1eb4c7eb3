"""`doctor run --spares K`, pure: which nodes the gate leaves out, and the launch line rewritten
for the nodes kept (node lists, hostfiles, counts, the rendezvous), for every launcher."""

from __future__ import annotations

from pathlib import Path

from doctor.core.model import Finding, Severity
from doctor.job.argv import parse_launch
from doctor.job.gate import Verdict
from doctor.job.narrow import hostfile_without, narrow
from doctor.job.spares import leave_out
from doctor.nodes.inventory import Node

NAMES = ["node1", "node2", "node3", "node4"]
NODES = [Node(n, n) for n in NAMES]


def fail(code: str, *nodes: str) -> Finding:
    return Finding(code, Severity.FAIL, f"{code} on {','.join(nodes) or 'every node'}", nodes)


def verdict(*blocking: Finding, crashed: tuple[str, ...] = ()) -> Verdict:
    env = {n: {"GLOO_SOCKET_IFNAME": "eth0"} for n in NAMES}
    return Verdict(env, list(blocking), [], list(crashed))


def test_a_node_whose_failing_findings_name_only_it_is_left_out() -> None:
    given = verdict(fail("ssh.timeout", "node3"), fail("allreduce.bad_node", "node3"))
    spared, why = leave_out(given, 1, NAMES)
    assert why == "" and spared.passed
    assert spared.left_out == {"node3": ("ssh.timeout", "allreduce.bad_node")}
    assert "node3" not in spared.env and set(spared.env) == {"node1", "node2", "node4"}
    assert spared.spared == given.blocking


def test_two_nodes_need_two_spares() -> None:
    given = verdict(fail("ssh.timeout", "node3"), fail("reach.tcp", "node2", "node4"))
    spared, why = leave_out(given, 2, NAMES)
    assert not spared.passed and spared.left_out == {}
    assert why == "3 nodes fail (node[2-4]), more than 2"
    spared, why = leave_out(given, 3, NAMES)
    assert spared.passed and set(spared.left_out) == {"node2", "node3", "node4"}


def test_what_names_no_node_leaves_nothing_out() -> None:
    spared, why = leave_out(
        verdict(fail("allreduce.failed"), fail("ssh.timeout", "node3")), 2, NAMES
    )
    assert not spared.passed and "allreduce.failed names no node" in why


def test_a_crashed_check_leaves_nothing_out() -> None:
    spared, why = leave_out(verdict(fail("ssh.timeout", "node3"), crashed=("mesh",)), 1, NAMES)
    assert not spared.passed and "a check crashed (mesh)" in why


def test_a_node_not_in_the_job_cannot_be_left_out() -> None:
    spared, why = leave_out(verdict(fail("reach.tcp", "198.18.0.9")), 1, NAMES)
    assert not spared.passed and "198.18.0.9 is not one of the job's nodes" in why


def test_every_node_failing_leaves_nothing_to_launch_on() -> None:
    spared, why = leave_out(verdict(fail("x", "node1", "node2")), 5, ["node1", "node2"])
    assert not spared.passed and why == "every node fails"


def test_a_passing_gate_is_left_as_it_is() -> None:
    given = verdict()
    assert leave_out(given, 1, NAMES) == (given, "")


def words(line: str) -> list[str]:
    return line.split()


def argv(line: str, out: set[str], tmp_path: Path, nodes: list[Node] = NODES) -> list[str]:
    done = narrow(parse_launch(words(line)), nodes, out, tmp_path)
    return list(done.line.argv)


def test_mpirun_hosts_and_one_process_per_slot(tmp_path: Path) -> None:
    got = argv("mpirun -H node1,node2,node3,node4 -np 4 python train.py -H x", {"node3"}, tmp_path)
    assert got == words("mpirun -H node1,node2,node4 -np 3 python train.py -H x")
    slots = [Node(n, n, slots=2) for n in NAMES]
    got = argv(
        "mpirun --host=node1:2,node2:2,node3:2,node4:2 -n 8 a.out", {"node1"}, tmp_path, slots
    )
    assert got == words("mpirun --host=node2:2,node3:2,node4:2 -n 6 a.out")
    # Not one per slot: the user's count is kept (and Open MPI says if it no longer fits).
    got = argv("mpirun -H node1,node2,node3,node4 -np 2 a.out", {"node3"}, tmp_path)
    assert got[3:5] == ["-np", "2"]


def test_mpirun_hostfile_is_written_anew_in_the_logs(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text(
        "# the rack\nnode1 slots=8\nnode2 slots=8\nroot@node3 slots=8  # sick\nnode4\n"
    )
    done = narrow(
        parse_launch(["mpirun", "--hostfile", str(hostfile), "a.out"]), NODES, {"node3"}, tmp_path
    )
    (path,) = done.files
    assert done.line.argv[2] == str(path) and path.parent == tmp_path
    assert done.files[path] == "# the rack\nnode1 slots=8\nnode2 slots=8\nnode4\n"
    assert hostfile.read_text().count("node3") == 1  # the user's file is left alone
    assert done.line.hostfile == path
    assert done.changes == [f"--hostfile {path} (was {hostfile})"]


def test_mpirun_without_hosts_is_given_the_nodes_kept(tmp_path: Path) -> None:
    assert argv("mpirun -np 4 a.out", {"node2"}, tmp_path) == (
        words("mpirun -H node1,node3,node4 -np 3 a.out")
    )


def test_horovodrun_hosts_and_processes(tmp_path: Path) -> None:
    slots = [Node(n, n, slots=4) for n in NAMES]
    got = argv(
        "horovodrun -np 16 -H node1:4,node2:4,node3:4,node4:4 python t.py",
        {"node4"},
        tmp_path,
        slots,
    )
    assert got == words("horovodrun -np 12 -H node1:4,node2:4,node3:4 python t.py")


def test_srun_nodelist_count_and_exclusions(tmp_path: Path) -> None:
    got = argv("srun -N 4 -w node[1-4] python t.py", {"node3"}, tmp_path)
    assert got == words("srun -N 3 -w node[1-2,4] python t.py")
    assert argv("srun --nodes=4 python t.py", {"node3"}, tmp_path) == (
        words("srun --exclude=node3 --nodes=3 python t.py")
    )
    assert argv("srun -x node9 python t.py", {"node3"}, tmp_path) == (
        words("srun -x node9,node3 python t.py")
    )


def test_deepspeed_include_exclude_and_nodes(tmp_path: Path) -> None:
    got = argv("deepspeed --num_nodes 4 --include node1:0,1@node3@node4 t.py", {"node3"}, tmp_path)
    assert got == words("deepspeed --num_nodes 3 --include node1:0,1@node4 t.py")
    assert argv("deepspeed t.py", {"node3"}, tmp_path) == words("deepspeed --exclude node3 t.py")


def test_torchrun_counts_and_a_rendezvous_on_a_node_left_out(tmp_path: Path) -> None:
    got = argv(
        "torchrun --nnodes 4 --master-addr node1 --master-port 29400 t.py", {"node1"}, tmp_path
    )
    assert got == words("torchrun --nnodes 3 --master-addr node2 --master-port 29400 t.py")
    got = argv(
        "torchrun --nnodes=4 --rdzv-endpoint=node3:29400 t.py --nnodes 4", {"node3"}, tmp_path
    )
    assert got == words("torchrun --nnodes=3 --rdzv-endpoint=node1:29400 t.py --nnodes 4")
    # Placeholders are the doctor's: filled in for the nodes kept at launch, not here.
    same = "torchrun --nnodes {nnodes} --master-addr {master_addr} t.py"
    assert argv(same, {"node1"}, tmp_path) == words(same)


def test_accelerate_machines(tmp_path: Path) -> None:
    got = argv(
        "accelerate launch --num_machines 4 --main_process_ip node2 t.py", {"node2"}, tmp_path
    )
    assert got == words("accelerate launch --num_machines 3 --main_process_ip node1 t.py")


def test_hostfile_lines_of_every_format() -> None:
    text = "node1:4\n[fe80::1]:2\nu@node3 slots=2\n\n# c\nnode4 max_slots=9 # x\n"
    assert hostfile_without(text, {"node1", "fe80::1", "node4"}) == "u@node3 slots=2\n\n# c\n"
