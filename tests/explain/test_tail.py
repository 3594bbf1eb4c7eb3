"""The long tail's readers (the end of signatures.json), on fixtures written from each emitter's
format strings (tests/fixtures/logs/tail: every header names the source and version) and on the
Slurm bed's own ends of a job (tests/fixtures/logs/slurm, captured by
tests/explain/capture/slurm_ends.py)."""

from __future__ import annotations

import pytest

from doctor.core.logline import strip_prefixes
from doctor.core.model import Severity
from doctor.explain.catalogue import catalogue
from doctor.explain.engine import context, findings
from tests.explain.fixtures import LOGS, scan, scan_text

# The codes each fixture gives, in the order the failures happened, and its first failure.
TAIL = {
    "tail/cuda-launch-failure.log": ["cuda.gpu_fault", "nccl.result.remote_error"],
    "tail/cuda-no-kernel-image.log": ["cuda.no_kernel_image"],
    "tail/healthy-noisy.log": [],
    "tail/hip-no-binary.log": ["cuda.no_kernel_image"],
    "tail/kernel-aer-xid.log": ["host.pcie_aer", "gpu.xid.fell_off_bus"],
    "tail/kernel-mce.log": ["host.machine_check"],
    "tail/libfabric-efa-warn.log": ["libfabric.error"],
    "tail/deepspeed-worker-failed.log": ["python.exception", "deepspeed.worker_failed"],
    "tail/deepspeed-worker-killed.log": ["deepspeed.worker_killed"],
    "tail/mpich-fatal-error.log": ["mpi.error"],
    "tail/nccl-2.12-ib-remote-access.log": ["nccl.ib.completion_error"],
    "tail/nccl-2.32-diag-xid.log": ["nccl.diag.xid"],
    "tail/nccl-2.4-ib-completion.log": [
        "nccl.ib.completion_retry_exceeded",
        "nccl.result.system_error",
    ],
    "tail/nccl-attn-degraded.log": ["nccl.attn"],
    "tail/nccl-cuda-stub-driver.log": ["cuda.driver_unusable", "nccl.result.cuda_error"],
    "tail/nccl-ib-async-event.log": [
        "nccl.ib.async_error",
        "nccl.ib.completion_retry_exceeded",
        "nccl.result.system_error",
    ],
    "tail/nccl-ib-async-notice.log": ["nccl.ib.async_notice"],
    "tail/nccl-tests-wrong.log": ["nccl_tests.wrong_results"],
    "tail/nccl-warn-by-file.log": [
        "nccl.warn.p2p",
        "nccl.warn.shm",
        "nccl.warn.init",
        "nccl.warn.cuda",
        "nccl.warn.net_plugin",
        "nccl.warn.ib",
    ],
    "tail/ofi-cxi-register.log": [
        "libfabric.registration_failed",
        "nccl.ofi.register_failed",
        "nccl.result.remote_error",
    ],
    "tail/pyxis-import-failed.log": ["container.start_failed"],
    "tail/slurm-allocation-failed.log": ["slurm.allocation_failed"],
    "tail/slurm-node-fail.log": [
        "slurm.node_fail",
        "nccl.socket.peer_closed",
        "nccl.warn.proxy",
        "slurm.cancelled",
        "slurm.task_killed",
    ],
    "tail/slurm-time-limit-after-hang.log": ["slurm.time_limit"],
    "tail/torchrun-value-error.log": ["python.exception"],
    "tail/torch-nccl-unique-id.log": ["torch.store.unique_id_failed"],
    "tail/ucx-caught-signal.log": ["ucx.caught_signal", "mpi.rank_exited", "mpi.rank_killed"],
    "tail/ucx-error.log": ["ucx.error", "mpi.error"],
    "tail/unrecognised-python-logging.log": ["explain.unrecognised"],
    "slurm/time-limit.log": ["slurm.time_limit"],
    "slurm/node-failure.log": ["slurm.node_fail", "slurm.cancelled"],
}
# Where a generic reader's line comes first, the specific signature after it is still the cause;
# a consequence (the peers' lost sockets) never is.
FIRST = {
    # The HCA's own port error, 29 s before the completion error it brought on.
    "tail/nccl-ib-async-event.log": "nccl.ib.async_error",
    "tail/slurm-node-fail.log": "slurm.node_fail",
    "tail/ofi-cxi-register.log": "libfabric.registration_failed",
    "tail/cuda-launch-failure.log": "cuda.gpu_fault",
    "tail/hip-no-binary.log": "cuda.no_kernel_image",
    "tail/nccl-2.4-ib-completion.log": "nccl.ib.completion_retry_exceeded",
    "tail/ucx-caught-signal.log": "ucx.caught_signal",
    "tail/unrecognised-python-logging.log": "explain.unrecognised",
    "slurm/time-limit.log": "slurm.time_limit",
    "slurm/node-failure.log": "slurm.node_fail",
}


def test_every_tail_fixture_is_listed() -> None:
    on_disk = {f"{p.parent.name}/{p.name}" for p in LOGS.glob("*/*.log")}
    assert {n for n in on_disk if n.startswith(("tail/", "slurm/"))} == set(TAIL)


@pytest.mark.parametrize("name", sorted(TAIL))
def test_tail_codes_in_order(name: str) -> None:
    result = scan(LOGS / name)
    assert [f.code for f in findings(result)] == TAIL[name]
    for hit in result.hits.values():  # the scanner reads only lines holding a keyword
        for _, _, said in hit.evidence:
            assert any(k in said for k in hit.signature.keywords), (name, hit.signature.code)


@pytest.mark.parametrize("name", sorted(FIRST))
def test_tail_first_failure(name: str) -> None:
    assert context(scan(LOGS / name))["first_error"]["code"] == FIRST[name]


@pytest.mark.parametrize("name", ["tail/healthy-noisy.log", "tail/nccl-attn-degraded.log"])
def test_healthy_noise_is_no_failure(name: str) -> None:
    assert all(f.severity < Severity.FAIL for f in findings(scan(LOGS / name)))


def test_a_fabric_notice_is_no_failure_and_the_port_error_beside_it_is() -> None:
    """NCCL WARNs every IB async event but one: an SM change or re-registration is a note (no
    first failure at all), a port error the cause of what follows on that node."""
    notice = scan(LOGS / "tail/nccl-ib-async-notice.log")
    assert [(f.code, f.severity) for f in findings(notice)] == [
        ("nccl.ib.async_notice", Severity.INFO)
    ]
    assert context(notice)["first_error"] is None
    older = "gpu-b02:6120:6188 [3] misc/ibvwrap.cc:208 NCCL WARN NET/IB : Got async event : "
    (error,) = lines(older + "port error")
    assert (error.code, error.nodes) == ("nccl.ib.async_error", ("gpu-b02",))
    assert "port error" in error.summary


def lines(*text: str) -> list:
    return findings(scan_text("\n".join(text), "log"))


def test_nccl_2_4_completion_without_a_peer() -> None:
    (found,) = lines(
        "n6:41872:42107 [1] transport/net_ib.cc:789 NCCL WARN NET/IB : Got completion with "
        "error 12, opcode 1, len 32768, vendor err 129"
    )
    assert found.code == "nccl.ib.completion_retry_exceeded"
    assert found.summary.startswith("IB completion error 12: IBV_WC_RETRY_EXC_ERR")
    assert found.nodes == ("n6",)


def test_a_plugin_function_in_the_warn_prefix_is_no_host() -> None:
    line = (
        "nid001234:61201:61388 [0] register_mr_buffers:647 NCCL WARN NET/OFI Unable to register "
        "memory (type = 2) for device 0. RC: -12, Error: Cannot allocate memory"
    )
    text, origin = strip_prefixes(line)
    assert text.startswith("NCCL WARN NET/OFI") and origin.host == "nid001234"
    assert origin.src == "register_mr_buffers"
    result = scan(LOGS / "tail/ofi-cxi-register.log")
    hosts = {p["host"] for p in result.nccl.to_json()["processes"]}
    assert "register_mr_buffers" not in hosts and "nid001234" in hosts


def test_a_warn_line_is_read_by_its_source_file_where_its_words_name_no_subsystem() -> None:
    (found,) = lines("gpu-c:6001:6001 [0] init.cc:1701 NCCL WARN rank 9 exceeds ndev=8")
    assert found.code == "nccl.warn.init" and "rank 9 exceeds ndev=8" in found.summary
    # Without the file the words alone decide, and these name no subsystem: the line is
    # error-looking for no reader, so unrecognised rather than silent.
    assert [f.code for f in lines("NCCL WARN rank 9 exceeds ndev=8")] == []


def test_a_bare_exception_stands_only_where_nothing_more_specific_explains() -> None:
    exc = "[rank1]: ValueError: bad shard"
    assert [f.code for f in lines(exc)] == ["python.exception"]
    assert findings_of(exc, "[rank1]: RuntimeError: CUDA error: out of memory") == ["cuda.oom"]
    # torchrun's own report of the child's failure is the launcher's, not the rank's error.
    child = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
    assert "python.exception" not in findings_of(child)


def findings_of(*text: str) -> list[str]:
    return [f.code for f in lines(*text)]


def test_unrecognised_lines_are_quoted_with_who_printed_them_and_what_to_capture() -> None:
    (found,) = findings(scan(LOGS / "tail/unrecognised-python-logging.log"))
    assert found.code == "explain.unrecognised" and found.severity is Severity.WARN
    assert "ERROR:trainer.ckpt:upload of shard 3" in found.summary
    # names no culprit: the rank that printed them only reported them
    assert found.data["reported_by"]["ranks"] == [3] and "ranks" not in found.data
    assert "NCCL_DEBUG=INFO" in found.fix.text and "dmesg" in found.fix.text


def test_information_and_warnings_are_not_unrecognised_errors() -> None:
    assert (
        findings_of(
            "[I1125 06:35:45.428907651 TCPStoreLibUvBackend.cpp:1266] [c10d] Failed to bind "
            "to ipv6 address, trying ipv4. Error: The server socket has failed to listen",
            "gpu-n02:5120:5120 [0] NCCL INFO Failed to initialize NET plugin IB",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d",
            "epoch 1 | train error: 0.2310 | val error: 0.2512",
            "RAS status: RUNNING INCOMPLETE,ERROR,MISMATCH",
        )
        == []
    )
    assert findings_of("[E1125 06:35:45.4 foo.cpp:12] fatal: the store went away") == [
        "explain.unrecognised"
    ]


def test_cuda_and_hip_errors_by_name_have_a_class() -> None:
    cases = {
        "RuntimeError: CUDA error: unknown error": "cuda.gpu_fault",
        "RuntimeError: HIP error: unspecified launch failure": "cuda.gpu_fault",
        "NCCL WARN Cuda failure 'hardware stack error'": "cuda.gpu_fault",
        "cudaErrorNoKernelImageForDevice": "cuda.no_kernel_image",
        '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"': (
            "cuda.no_kernel_image"
        ),
        "CUDA error: system has unsupported display driver / cuda driver combination": (
            "cuda.driver_unusable"
        ),
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB": "cuda.oom",
        "RuntimeError: CUDA error: misaligned address": "cuda.error",
        # cuBLAS's status through PyTorch's CUDA_CHECK (CUDABlas.cpp): a long call follows it.
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( "
        "handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, "
        "c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`": "cuda.error",
    }
    for line, code in cases.items():
        assert findings_of(line) == [code], line


def test_slurm_words() -> None:
    stepd = "slurmstepd: error: *** JOB 918273 ON gpu-n01 CANCELLED AT 2026-11-21T12:00:05"
    assert findings_of(stepd + " DUE TO TIME LIMIT ***") == ["slurm.time_limit"]
    # Slurm 17.02 and older: no "ON host". The steps a lost node ends are cancelled: the node
    # is named by srun's own line, never by the nodes that print this.
    old = "slurmstepd: error: *** JOB 77 CANCELLED AT 2017-03-01T10:00:00 DUE TO NODE FAILURE ***"
    (cancelled,) = lines("0: " + old)
    assert cancelled.code == "slurm.cancelled" and cancelled.data["reported_by"]["ranks"] == [0]
    assert "due to node failure" in cancelled.summary and not cancelled.nodes
    assert findings_of(stepd + " ***") == ["slurm.cancelled"]
    (lost,) = lines("srun: error: Node failure on nid005[012-013]")
    assert lost.summary == "Slurm lost a node of the job: nid005[012-013]"


def test_a_shells_exit_code_for_a_signal_is_the_task_killed() -> None:
    """srun's "Exited with exit code N" where a wrapper shell passed on its program's signal as
    128 + N: a kill or a crash of that task; an abort (134, a watchdog's end of a waiting rank)
    or a plain failure is not named."""
    for code, signal in ((137, "kill"), (139, "segfault"), (135, "bus error")):
        (found,) = lines(f"srun: error: nid001240: task 5: Exited with exit code {code}")
        assert found.code == "slurm.task_killed", signal
        assert (found.nodes, found.data["ranks"]) == (("nid001240",), [5])
    for code in (1, 134, 143):
        found = lines(f"srun: error: nid001240: task 5: Exited with exit code {code}")
        assert "slurm.task_killed" not in [f.code for f in found], code


def test_a_rank_mpirun_saw_aborted_or_stopped_is_not_the_culprit() -> None:
    """mpirun's report of a rank ended by SIGABRT (its watchdog's abort after a timeout) or
    SIGTERM (a stop from outside) says the job went down, not which rank failed; a kill or a
    crash names the rank."""
    report = "mpirun noticed that process rank 3 with PID 0 on node vm exited on signal {}."
    for ended in ("6 (Aborted)", "15 (Terminated)"):
        (found,) = lines(report.format(ended))
        assert (found.code, found.nodes, found.data.get("ranks")) == ("mpi.rank_exited", (), None)
    (killed,) = lines(report.format("9 (Killed)"))
    assert (killed.code, killed.nodes, killed.data["ranks"]) == ("mpi.rank_killed", ("vm",), [3])


def test_the_store_clients_timeout_in_any_unit() -> None:
    """socket.cpp formats the timeout with fmt's chrono ("{} while trying to connect to ({}, {})"):
    milliseconds in most builds, seconds where the option is held in seconds."""
    said = "[E socket.cpp:957] [c10d] The client socket has timed out after {} while trying to "
    for after in ("900s", "600000ms"):
        (found,) = lines(said.format(after) + "connect to (10.1.2.3, 29500).")
        assert (found.code, found.nodes) == ("torch.store.connect_timeout", ("10.1.2.3",))


def test_deepspeeds_launcher_names_a_killed_worker_and_follows_a_failed_one() -> None:
    said = "[2024-11-18 04:41:12,180] [ERROR] [launch.py:322:sigkill_handler] ['python', 'x.py'] "
    (killed,) = lines(said + "exits with return code = -11")
    assert killed.code == "deepspeed.worker_killed" and "signal -11" in killed.summary
    for code in ("1", "-6", "-15"):
        (failed,) = lines(said + f"exits with return code = {code}")
        assert failed.code == "deepspeed.worker_failed", code


def test_the_readers_keep_to_the_sieve() -> None:
    """The long tail's keywords all hold one of the 64 anchors (tests/explain/anchors.py)."""
    from doctor.explain.stored import anchors

    stored = anchors()
    assert len(stored) <= 64
    for sig in catalogue():
        for kw in sig.keywords:
            assert any(a in kw.encode() for a in stored), (sig.code, kw)
