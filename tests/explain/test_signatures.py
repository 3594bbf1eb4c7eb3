"""Every signature, on text captured here for real or written from the emitter's format."""

from __future__ import annotations

import json
import re
from importlib.resources import files

import jsonschema
import pytest

from doctor.core.model import Severity
from doctor.explain.catalogue import CatalogueError, catalogue, parse_catalogue
from doctor.explain.engine import findings
from tests.explain.fixtures import LOGS, body, scan, scan_text
from tests.explain.test_tail import TAIL

# The codes each fixture must produce: the job's first failure first, then the rest in the order
# they happened.
EXPECTED = {
    "format/cuda-device-assert.log": ["cuda.device_assert"],
    "format/cuda-driver-too-old.log": ["cuda.driver_too_old"],
    "format/cuda-ecc.log": ["cuda.ecc"],
    "format/cuda-error-generic.log": ["cuda.error"],
    "format/cuda-illegal-address.log": ["cuda.illegal_address"],
    "format/cuda-invalid-ordinal.log": ["cuda.invalid_device_ordinal"],
    "format/cuda-no-device.log": ["cuda.no_device"],
    "format/cuda-peer-access.log": ["nccl.p2p.peer_access_failed", "cuda.peer_access"],
    "format/cuda-oom.log": ["cuda.oom", "torch.elastic.worker_failed"],
    "format/cuda-cublas-alloc.log": ["cuda.oom"],
    "format/kernel-xid.log": [
        "gpu.xid",
        "gpu.xid.nvlink",
        "gpu.xid.memory",
        "gpu.xid.fell_off_bus",
    ],
    "format/slurm-oom.log": ["host.oom_killed"],
    "format/nvml-mismatch.log": ["gpu.driver_mismatch"],
    "format/nccl-internal-error.log": ["nccl.result.internal_error"],
    "format/torch-nccl-heartbeat.log": [
        "torch.nccl.watchdog_timeout",
        "torch.nccl.comm_aborted",
        "torch.nccl.heartbeat_timeout",
    ],
    "format/horovod.log": ["horovod.no_common_interface", "horovod.shut_down"],
    "format/horovod-p2p-same-hostname.log": ["nccl.p2p.ipc_failed", "nccl.result.cuda_error"],
    "format/nccl-connect-failed.log": ["nccl.socket.connect_failed"],
    "format/nccl-context-gpu.log": [],
    "format/nccl-gpu-duplicate.log": ["nccl.gpu.duplicate"],
    "format/nccl-ib.log": [
        "nccl.ib.memlock",
        "nccl.ib.modify_qp",
        "nccl.ib.completion_retry_exceeded",
        "nccl.ib.completion_local_protection",
        "nccl.ib.completion_flushed",
    ],
    "format/nccl-mismatch.log": [
        "nccl.version.mismatch",
        "nccl.socket.truncated",
        "nccl.p2p.disabled_nvlink",
    ],
    # The failure before the note (libibverbs missing is information, not a failure).
    "format/nccl-net-plugin.log": [
        "nccl.ib.no_ip_interface",
        "nccl.ib.no_libibverbs",
        "nccl.net.no_plugin",
    ],
    "format/nccl-peer-closed.log": [
        "nccl.shm.full",
        "nccl.socket.peer_closed",
        "nccl.warn.proxy",
        "nccl.result.remote_error",
    ],
    "format/nccl-ring-no-loop.log": ["nccl.ring.no_loop"],
    # The peer an IB error names, before the watchdog's abort printed ahead of it (stderr
    # unbuffered, NCCL's stdout buffered); the peer refused; an Xid before CUDA's word on it.
    "format/nccl-ib-peer-gone.log": [
        "nccl.ib.completion_retry_exceeded",
        "torch.nccl.comm_aborted",
        "nccl.result.remote_error",
    ],
    "format/nccl-connect-refused-peer.log": [
        "nccl.socket.connect_failed",
        "nccl.result.remote_error",
    ],
    "format/xid-rank-gpu.log": ["gpu.xid.fell_off_bus", "cuda.gpu_fault"],
    "format/nccl-shm-full.log": ["nccl.shm.full"],
    "format/nccl-shm-removed.log": ["nccl.shm.removed"],
    "format/torch-nccl-watchdog.log": ["torch.nccl.watchdog_timeout"],
    # The cause NCCL's 'Last error:' gives before the result code that restates it.
    "format/torch-nccl-last-error.log": ["nccl.socket.connect_failed", "nccl.result.system_error"],
    "real/mpi-host-key-unknown.log": ["ssh.host_key_failed", "mpi.daemons_failed"],
    "real/mpi-not-enough-slots.log": ["mpi.not_enough_slots"],
    "real/mpi-rank-exit.log": ["mpi.rank_exited"],
    # Open MPI's handler saw the crash; mpirun's report of the rank (a restatement) names it.
    "real/mpi-rank-segfault.log": ["mpi.rank_killed", "mpi.process_signal", "mpi.rank_exited"],
    "real/mpi-orted-not-found.log": ["mpi.orted_not_found", "mpi.daemons_failed"],
    "real/mpi-unreachable-host.log": ["ssh.connect_failed", "mpi.daemons_failed"],
    "real/nccl-bootstrap-netns.log": [],
    # The resolver's failure (a socket WARN) comes before NCCL says the id is invalid.
    "real/nccl-comm-id-invalid.log": ["nccl.comm_id.invalid", "nccl.warn.socket"],
    "real/nccl-comm-id-no-subnet.log": ["nccl.comm_id.no_subnet", "nccl.result.system_error"],
    "real/nccl-init-no-gpu.log": ["nccl.cuda.failure", "nccl.result.cuda_error"],
    "real/nccl-no-iface.log": ["nccl.iface.none_found", "nccl.result.invalid_usage"],
    "real/nccl-wrong-magic.log": ["nccl.socket.wrong_magic"],
    "real/python-connect-refused.log": ["net.connection_refused"],
    "real/ssh-connection-refused.log": ["ssh.connect_failed"],
    "real/ssh-host-key-changed.log": ["ssh.host_key_changed", "ssh.host_key_failed"],
    "real/ssh-host-key-unknown.log": ["ssh.host_key_failed"],
    "real/ssh-permission-denied.log": ["ssh.permission_denied"],
    "real/ssh-unresolved.log": ["ssh.unresolved"],
    "real/torch-gloo-bogus-iface.log": ["gloo.no_address"],
    # Ranks' outputs are concatenated (rank 0 first); time order puts rank 1's refused dial to
    # 127.0.1.1 (04:26:13) before rank 0's connect timeout (04:26:38).
    "real/torch-gloo-loopback-hostname.log": ["gloo.loopback_address", "gloo.connect_failed"],
    "real/torch-gloo-op-timeout.log": ["gloo.op_timeout"],
    "real/torch-init-unreachable.log": ["torch.store.connect_timeout", "net.unreachable"],
    "real/torch-tcpstore-refused.log": ["torch.store.connect_timeout"],
    "real/torch-tcpstore-wait-clients.log": ["torch.store.wait_clients_timeout"],
    "real/torch-torchrun-rdzv-timeout.log": ["torch.rendezvous.timeout"],
    "real/torch-store-port-in-use.log": ["torch.store.port_in_use"],
    "real/torch-store-wait-timeout.log": ["torch.store.wait_timeout"],
    "real/torch-dataloader-killed.log": ["torch.dataloader.worker_killed"],
    # The worker's own handler prints the bus error; the main process then reports the death.
    "real/torch-dataloader-bus-error.log": [
        "torch.dataloader.bus_error",
        "torch.dataloader.worker_killed",
    ],
    "real/torch-dataloader-shm-full.log": ["torch.shm.full"],
    "real/torch-dataloader-timeout.log": ["torch.dataloader.timeout"],
    "real/torch-share-memory-full.log": ["torch.shm.full"],
    "real/torch-shm-too-many-files.log": ["torch.shm.too_many_files"],
    # The rank that received more than its buffer aborts; its peers then lose it.
    "real/torch-gloo-size-mismatch.log": [
        "gloo.size_mismatch",
        "gloo.peer_lost",
        "torch.elastic.worker_failed",
        "torch.elastic.worker_sigterm",
    ],
    # Rank 0 sees its peer vanish before torchrun's agent reports rank 1's death.
    "real/torchrun-worker-sigkill.log": [
        "torch.elastic.worker_sigkill",
        "gloo.peer_lost",
        "torch.elastic.worker_sigterm",
    ],
    "real/torchrun-worker-exception.log": [
        "python.exception",
        "gloo.peer_lost",
        "torch.elastic.worker_failed",
        "torch.elastic.worker_sigterm",
    ],
    # The kernel's OOM kill (dmesg, after the job's output) is why torchrun saw a SIGKILL.
    "real/torchrun-worker-oom-killed.log": [
        "host.oom_killed",
        "gloo.peer_lost",
        "torch.elastic.worker_sigkill",
        "torch.elastic.worker_sigterm",
    ],
    # Healthy runs with every debug log on: many INFO/WARNING lines, nothing to explain.
    "real/healthy-torchrun-gloo-debug.log": [],
    "real/healthy-dataloader.log": [],
    # The late agent finds the rendezvous store's port taken by the first one, and joins.
    "real/healthy-torchrun-two-agents.log": [],
    # c10d logs every refused attempt while the store's server is not up yet, then connects.
    "real/healthy-store-server-late.log": [],
    # Real NCCL 2.28.9 on one GPU (tests/explain/capture/gpu_nccl.py): a rank alone, two ranks
    # that NCCL_HOSTID makes two 'nodes' of one hostname over sockets; two ranks on one GPU.
    "real/healthy-nccl-one-rank.log": [],
    "real/healthy-nccl-two-hostids.log": [],
    "real/healthy-nccl-two-hostids-default-subsys.log": [],
    "real/nccl-duplicate-gpu.log": [
        "nccl.gpu.duplicate",
        "nccl.result.invalid_usage",
        "torch.elastic.worker_failed",
    ],
    # NCCL's INFO lines of every version range (what NCCL used, not what failed): no signature;
    # the reader's facts are tested in test_nccl_versions.py, their judgment in tests/checks.
    "nccl/rccl-roce.log": [],
    "nccl/v2.12-ib-gdr-srun.log": [],
    "nccl/v2.18-roce-k8s-hpcx.log": [],
    "nccl/v2.21-efa-ofi.log": [],
    "nccl/v2.21-v2.18-drift.log": [],
    "nccl/v2.27-socket-fallback.log": [],
    "nccl/v2.31-diagnostics.log": [],
    "nccl/v2.4-ib-mpirun.log": [],
    "nccl/v2.7-socket-torchrun.log": [],
    # A rank killed or crashed mid-job, under each launcher (captured: hang/exits/README.md).
    "hang/exits/mpirun-kill.log": ["mpi.rank_killed", "mpi.rank_exited", "gloo.peer_lost"],
    "hang/exits/mpirun-3-nodes.log": ["mpi.rank_killed", "mpi.rank_exited", "gloo.peer_lost"],
    "hang/exits/srun-kill.log": ["slurm.task_killed", "gloo.peer_lost"],
    "hang/exits/srun-kill-on-bad-exit.log": [
        "slurm.task_killed",
        "gloo.peer_lost",
        "slurm.cancelled",
    ],
    "hang/exits/srun-segv.log": ["slurm.task_killed", "gloo.peer_lost"],
    # A job's failures as Slurm sees them, captured on the harness (bed/README.md).
    "bed/store-refused.log": ["torch.store.connect_timeout"],
    "bed/hung-timeout.log": ["gloo.op_timeout", "slurm.cancelled"],
    "bed/time-limit.log": ["slurm.time_limit"],
    "bed/node-fail.log": ["slurm.node_fail", "slurm.cancelled"],
}

# What each captured failure must be blamed on (the first error), not only that it is found.
FIRST = {
    "real/torch-dataloader-bus-error.log": "torch.dataloader.bus_error",
    "real/torch-gloo-size-mismatch.log": "gloo.size_mismatch",
    "real/torchrun-worker-sigkill.log": "torch.elastic.worker_sigkill",
    # Beside consequences alone, the exception rank 1 raised (a fallback reader's) is their
    # cause; a waiting rank's own report (monitoredBarrier's, a watchdog's) never is.
    "real/torchrun-worker-exception.log": "python.exception",
    "hang/gloo/monitored-barrier-late-rank.log": "torch.elastic.worker_failed",
    "real/torchrun-worker-oom-killed.log": "host.oom_killed",
    "format/cuda-oom.log": "cuda.oom",
    # NCCL_DEBUG unset: the cause is only in the "Last error:" PyTorch appends.
    "format/torch-nccl-last-error.log": "nccl.socket.connect_failed",
    "format/torch-nccl-heartbeat.log": "torch.nccl.watchdog_timeout",
    "format/horovod-p2p-same-hostname.log": "nccl.p2p.ipc_failed",
    "format/nccl-ib-peer-gone.log": "nccl.ib.completion_retry_exceeded",
    "format/xid-rank-gpu.log": "gpu.xid.fell_off_bus",
    # The killed rank, not the peers that lost it (printed first) nor the launcher's teardown.
    "hang/exits/mpirun-kill.log": "mpi.rank_killed",
    "hang/exits/srun-kill.log": "slurm.task_killed",
    "hang/exits/srun-kill-on-bad-exit.log": "slurm.task_killed",
}


def test_every_fixture_is_listed() -> None:
    on_disk = {f"{p.parent.name}/{p.name}" for p in LOGS.glob("*/*.log")}
    on_disk |= {f"hang/exits/{p.name}" for p in LOGS.glob("hang/exits/*.log")}
    assert on_disk == set(EXPECTED) | set(TAIL)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_codes_in_order(name: str) -> None:
    assert [f.code for f in findings(scan(LOGS / name))] == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(FIRST))
def test_first_failure(name: str) -> None:
    first = scan(LOGS / name).first_error()
    assert first is not None and first.signature.code == FIRST[name]


def test_every_signature_is_tested_on_a_fixture() -> None:
    tested = {code for codes in [*EXPECTED.values(), *TAIL.values()] for code in codes}
    assert {s.code for s in catalogue()} - tested == set()


def test_real_captures_cover_what_can_fail_here() -> None:
    real = {
        c
        for name, codes in EXPECTED.items()
        if name.startswith(("real/", "hang/exits/"))
        for c in codes
    }
    for code in (
        "gloo.loopback_address",
        "gloo.no_address",
        "nccl.iface.none_found",
        "nccl.comm_id.no_subnet",
        "ssh.host_key_failed",
        "ssh.permission_denied",
        "mpi.orted_not_found",
        "mpi.daemons_failed",
        "torch.store.connect_timeout",
        "torch.dataloader.worker_killed",
        "torch.dataloader.bus_error",
        "torch.shm.full",
        "torch.shm.too_many_files",
        "torch.elastic.worker_sigkill",
        "torch.elastic.worker_failed",
        "host.oom_killed",
        "gloo.peer_lost",
        "torch.store.port_in_use",
        "torch.dataloader.timeout",
        "mpi.rank_killed",
        "slurm.task_killed",
    ):
        assert code in real


def test_catalogue_is_well_formed() -> None:
    sigs = catalogue()
    assert len(sigs) >= 30
    for s in sigs:
        assert re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", s.code), s.code
        assert s.link.startswith("https://"), s.code
        assert s.fix.text and s.fix.commands and s.causes and s.meaning, s.code
        assert s.keywords and s.patterns, s.code


def test_a_pattern_only_fires_on_lines_holding_one_of_its_keywords() -> None:
    """The scanner reads only lines holding a keyword: every matched line must hold one."""
    for name in EXPECTED:
        result = scan(LOGS / name)
        for hit in result.hits.values():
            for _, _, said in hit.evidence:
                assert any(k in said for k in hit.signature.keywords), (
                    name,
                    hit.signature.code,
                )


def test_catalogue_follows_its_schema() -> None:
    text = files("doctor").joinpath("schema/signatures.schema.json").read_text()
    document = json.loads(files("doctor.explain").joinpath("signatures.json").read_text())
    jsonschema.validate(document, json.loads(text))


def test_the_consequences_are_the_known_set() -> None:
    """The issue's set: the watchdog's abort and timeout, the remote error, a peer closed or
    lost, a worker that failed or exited, the launcher's teardown."""
    consequences = {s.code for s in catalogue() if s.role == "consequence"}
    assert {
        "torch.nccl.watchdog_timeout",
        "torch.nccl.heartbeat_timeout",
        "torch.nccl.comm_aborted",
        "nccl.result.remote_error",
        "nccl.socket.peer_closed",
        "gloo.peer_lost",
        "gloo.op_timeout",
        "torch.elastic.worker_failed",
        "torch.elastic.worker_sigterm",
        "mpi.rank_exited",
        "horovod.shut_down",
    } <= consequences
    # each names its culprit only by what its match says (a lost peer), never by its printer
    assert all(s.culprit != () for s in catalogue() if s.role == "consequence")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"role": "secondary"}, "role 'secondary' is not one of"),
        ({"culprit": ["who"]}, "culprit group 'who' is not one of"),
        ({"culprit": ["peer"]}, "no pattern has culprit group peer"),
    ],
)
def test_a_role_or_culprit_the_catalogue_does_not_know_is_named(
    change: dict[str, object], said: str
) -> None:
    document = json.loads(files("doctor.explain").joinpath("signatures.json").read_text())
    entry = next(e for e in document["signatures"] if e["code"] == "cuda.oom")
    with pytest.raises(CatalogueError, match=f"cuda.oom: {re.escape(said)}"):
        parse_catalogue(json.dumps({"signatures": [{**entry, **change}]}))


def test_malformed_catalogue_names_the_entry() -> None:
    document = json.loads(files("doctor.explain").joinpath("signatures.json").read_text())
    broken = dict(document["signatures"][0], patterns=["(unclosed"])
    with pytest.raises(CatalogueError, match=broken["code"]):
        parse_catalogue(json.dumps({"signatures": [broken]}))
    with pytest.raises(CatalogueError, match="duplicate"):
        parse_catalogue(json.dumps({"signatures": [document["signatures"][0]] * 2}))


def test_consequence_points_at_the_rank_that_failed_first() -> None:
    result = scan(LOGS / "format/nccl-peer-closed.log")
    first = result.first_error()
    assert first is not None and first.signature.code == "nccl.shm.full"
    assert first.origin.rank == 1 and first.origin.host == "gpu-b"
    closed = next(f for f in findings(result) if f.code == "nccl.socket.peer_closed")
    assert "first failure: nccl.shm.full on rank 1 on gpu-b" in closed.summary
    # rank 0 only reported its peer's exit: never named as the cause
    assert closed.data["reported_by"]["ranks"] == [0] and "ranks" not in closed.data
    assert "[reported by rank 0, gpu-a pid 5001]" in closed.summary


def test_first_error_prefers_the_specific_over_the_generic() -> None:
    result = scan(LOGS / "real/torch-init-unreachable.log")
    assert result.first_error().signature.code == "torch.store.connect_timeout"  # type: ignore[union-attr]


def test_summaries_fill_in_what_the_line_said() -> None:
    by_code = {f.code: f for f in findings(scan(LOGS / "real/torch-tcpstore-wait-clients.log"))}
    assert (
        "waited for 2 processes but only 1 joined"
        in by_code["torch.store.wait_clients_timeout"].summary
    )
    ssh = findings(scan(LOGS / "real/mpi-unreachable-host.log"))[0]
    assert "198.18.11.77:22" in ssh.summary and "timed out" in ssh.summary
    assert all(f.severity is Severity.FAIL for f in findings(scan(LOGS / "format/nccl-ib.log")))


def test_horovod_rank_tag_names_the_rank_that_reported() -> None:
    """Horovod's shutdown is a consequence: the rank whose tag it carries only reported it."""
    shut = next(
        f for f in findings(scan(LOGS / "format/horovod.log")) if f.code == "horovod.shut_down"
    )
    assert shut.data["reported_by"]["ranks"] == [1] and "ranks" not in shut.data


def test_open_mpis_own_crash_report_names_the_node_without_mpiruns() -> None:
    """A rank's own output (mpirun --output-filename, or srun launching it) holds Open MPI's
    signal handler lines and not mpirun's report: the crash is named, on the host they give.
    A kill or an abort is no crash of the process's own (only the crash signals are read)."""
    captured = body(LOGS / "real/mpi-rank-segfault.log").decode()
    own = "".join(line + "\n" for line in captured.splitlines() if line.startswith("[vm:"))
    result = scan_text(own)
    first = result.first_error()
    assert first is not None and first.signature.code == "mpi.process_signal"
    (finding,) = findings(result)
    assert finding.nodes == ("vm",) and "Segmentation fault (signal 11)" in finding.summary
    aborted = own.replace("Segmentation fault (11)", "Aborted (6)")
    assert scan_text(aborted).first_error() is None
