"""What NCCL says, however little an excerpt holds: the bare version line of old NCCL (and who
printed it), and the network inferred from WARN lines where no line names it.

The lines are written from NCCL's format strings (nothing here was captured: no such cluster):
- NCCL 2.7.8 (tag v2.7.8-1) init.cc showVersion(): ``printf("%s\\n", VERSION_STRING)`` once, on
  stdout, in the process that calls ncclGetUniqueId (rank 0), so the line has no prefix;
  bootstrap.cc "Bootstrap : Using%s"; NCCL's logger "%s:%d:%d [%d] %s:%d NCCL WARN " for WARN;
- transport/net_ib.cc (2.7 to 2.22) "NET/IB : Got completion from peer %s with error %d, opcode
  %d, len %d, vendor err %d (%s)"; transport/net_socket.cc "NET/Socket : peer %s message
  truncated : receiving %d bytes instead of %d"; the HPC-X plugin's p2p_plugin.c and
  aws-ofi-nccl's nccl_ofi_net.c log through NCCL's logger with their own file names.
"""

from __future__ import annotations

from doctor.facts.nccl.log import NcclLog, parse_nccl_log
from tests.explain.fixtures import scan_text


def read(text: str) -> NcclLog:
    return scan_text(text, "job.log").nccl


# horovodrun over Open MPI (--tag-output): the training script's lines, then rank 0's bare
# version line, then NCCL's INFO lines of both ranks.
HOROVOD_278 = "\n".join(
    [f"[1,{r}]<stdout>:Epoch {i}: loading data" for i in range(8) for r in (0, 1)]
    + [
        "[1,0]<stdout>:NCCL version 2.7.8+cuda10.1",
        "[1,0]<stdout>:gpu01:2001:2001 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.1<0>",
        "[1,1]<stdout>:gpu02:2002:2002 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0>",
    ]
)


def test_the_bare_version_line_of_old_nccl_and_the_host_that_printed_it() -> None:
    for log in (read(HOROVOD_278), parse_nccl_log(HOROVOD_278.splitlines())):
        doc = log.to_json()
        assert (doc["version"], doc["cuda"]) == ("2.7.8", "10.1")
        # Rank 0's launcher label names it; rank 0's other lines say that is gpu01.
        assert doc["version_printed_by"] == ["gpu01"]
        assert [n["versions"] for n in doc["nodes"]] == [["2.7.8"], ["2.7.8"]]


def test_a_ray_worker_s_bare_version_line_is_its_process_s() -> None:
    text = (
        "(RayWorkerWrapper pid=7001, ip=10.0.0.9) NCCL version 2.7.8+cuda10.1\n"
        "(RayWorkerWrapper pid=7001, ip=10.0.0.9) w9:7001:7001 [0] NCCL INFO Bootstrap : Using "
        "[0]eth0:10.0.0.9<0>\n"
        "(RayWorkerWrapper pid=7002, ip=10.0.0.8) w8:7002:7002 [0] NCCL INFO Bootstrap : Using "
        "[0]eth0:10.0.0.8<0>\n"
    )
    assert read(text).to_json()["version_printed_by"] == ["w9"]


def test_a_bare_version_line_nobody_can_place_names_no_host() -> None:
    text = "NCCL version 2.7.8+cuda10.1\n" + "\n".join(HOROVOD_278.splitlines()[-2:])
    doc = read(text).to_json()
    assert doc["version"] == "2.7.8" and doc["version_printed_by"] == []


ROCE_HANG = """\
gpu-a:4411:4530 [3] transport/net_ib.cc:1294 NCCL WARN NET/IB : Got completion from peer 10.20.1.12<51234> with error 12, opcode 0, len 0, vendor err 129 (Recv)
gpu-a:4411:4530 [3] NCCL INFO transport/net.cc:1125 -> 6
gpu-b:3302:3390 [1] transport/net_ib.cc:1294 NCCL WARN NET/IB : Got completion from peer 10.20.1.11<40112> with error 5, opcode 0, len 0, vendor err 249 (Recv)
"""  # noqa: E501


def test_the_network_is_inferred_from_warn_lines_and_marked_so() -> None:
    doc = read(ROCE_HANG).to_json()
    assert [(p["host"], p["network"], p["network_from"]) for p in doc["processes"]] == [
        ("gpu-a", "IB", "inferred"),
        ("gpu-b", "IB", "inferred"),
    ]
    assert all(n["network_inferred"] and "NET/IB (inferred" in n["summary"] for n in doc["nodes"])


def test_each_source_file_and_subsystem_names_its_network() -> None:
    lines = {
        "IB": "h:1:2 [0] transport/net_ib/p2p.cc:301 NCCL WARN NET/IB: Got completion from "
        "peer 10.0.0.2<1> with status=12 opcode=RECV(128) vendor_err=129 hca mlx5_3",
        "Socket": "h:1:2 [0] transport/net_socket.cc:418 NCCL WARN NET/Socket : peer "
        "10.0.0.2<1> message truncated : receiving 1024 bytes instead of 512",
        "OFI": "h:1:2 [0] nccl_ofi_net.c:1402 NCCL WARN NET/OFI Request 0x1 completed with error",
        "gIB": "h:1:2 [0] NCCL WARN NET/gIB : Got completion from peer with error 12",
    }
    lines["IB (HPC-X)"] = lines["IB"].replace("transport/net_ib/p2p.cc", "p2p_plugin.c")
    for want, line in lines.items():
        (proc,) = read(line).to_json()["processes"]
        assert (proc["network"], proc["network_from"]) == (want.split()[0], "inferred"), line


def test_a_named_network_wins_over_an_inferred_one() -> None:
    text = ROCE_HANG + "gpu-a:4411:4411 [3] NCCL INFO Using network IBext\n"
    procs = {p["host"]: p for p in read(text).to_json()["processes"]}
    assert (procs["gpu-a"]["network"], procs["gpu-a"]["network_from"]) == ("IBext", "said")


def test_a_failed_net_init_infers_nothing() -> None:
    # INFO lines that say a network was tried and had no device are no evidence of its use.
    text = (
        "vm:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "vm:1:1 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>\n"
    )
    assert all(p["network_from"] != "inferred" for p in read(text).to_json()["processes"])
