"""No credential reaches any output: the whole preflight runs with credentials planted in its
environment, and every format it writes (terminal, JSON, JUnit, Markdown, HTML, the saved
capture) is searched for them, with and without --redact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from doctor.core.secrets import HIDDEN, hide_argv, hide_env, hide_secrets
from doctor.paste import read_inputs

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.c2lnbmF0dXJlLWhlcmU"
# The secret parts alone: what must appear in no output.
SECRETS = {
    "SLURM_JWT": JWT,
    "TORCH_HOME": "https://alice:Pa55w0rd-torch@models.example.com/cache",
    "OMPI_MCA_orte_precondition_transports": "0123456789abcdef-fedcba9876543210",
    "PMIX_SECURITY_KEY": "pmix-key-material-123",
    "NCCL_NET_PLUGIN_CONFIG": "endpoint=x;token=tok-NcclPlug1nSecret",
    "CUDA_CACHE_PATH": "/home/alice/ghp_abcdefghijklmnopqrstuvwxyz0123456789ab/cache",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1",  # not a secret: kept
}
LEAKS = (
    JWT,
    "Pa55w0rd-torch",
    "0123456789abcdef-fedcba9876543210",
    "pmix-key-material-123",
    "tok-NcclPlug1nSecret",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789ab",
)


@pytest.mark.parametrize("redact", [False, True])
def test_a_whole_preflight_leaks_nothing(tmp_path: Path, redact: bool) -> None:
    out = {fmt: tmp_path / f"report.{fmt}" for fmt in ("json", "junit", "markdown", "html")}
    argv = [sys.executable, "-m", "doctor", "-v", "preflight", "--local", "--no-allreduce"]
    argv += [f"--{fmt}={path}" for fmt, path in out.items()] + (["--redact"] if redact else [])
    env = {**os.environ, **SECRETS}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    saved = tmp_path / "saved"
    collect = [sys.executable, "-m", "doctor", "collect", "--local", "--save-raw", str(saved)]
    subprocess.run(collect, capture_output=True, env=env, timeout=300, check=True)
    probe = subprocess.run(
        [sys.executable, "-m", "doctor", "probe"], capture_output=True, text=True, env=env,
        timeout=300, check=True,
    )  # fmt: skip
    texts = {"stdout": proc.stdout, "stderr": proc.stderr, "probe": probe.stdout}
    texts |= {fmt: path.read_text() for fmt, path in out.items()}
    texts |= {p.name: p.read_text() for p in saved.iterdir()}
    for where, text in texts.items():
        for secret in LEAKS:
            assert secret not in text, f"{secret[:12]}... in {where}"
    # The capture keeps what is no secret, and says where one was.
    assert "HOROVOD_GLOO_RENDEZVOUS_ADDR" in probe.stdout and "10.0.0.1" in probe.stdout
    assert "https://alice:<redacted>@models.example.com/cache" in probe.stdout


def test_a_pasted_environment_is_hidden_as_the_probe_hides_it(tmp_path: Path) -> None:
    pasted = tmp_path / "env.txt"
    pasted.write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    env = read_inputs([f"gpu01={pasted}"])["gpu01"].value("env")
    assert isinstance(env, dict)
    assert env["OMPI_MCA_orte_precondition_transports"] == HIDDEN
    assert env["NCCL_NET_PLUGIN_CONFIG"] == f"endpoint=x;token={HIDDEN}"


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("https://u:p4ss@host/x", "https://u:<redacted>@host/x"),
        ("git+https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r", None),
        ("AKIAABCDEFGHIJKLMNOP", HIDDEN),
        ("xoxb-1234567890-abcdefghij", HIDDEN),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEF", HIDDEN),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----",
            HIDDEN,
        ),
        ('{"api_key": "abc123xyz"}', '{"api_key": "<redacted>"}'),
        ("--password=hunter22 --port 29500", "--password=<redacted> --port 29500"),
    ],
)
def test_shapes(text: str, hidden: str | None) -> None:
    got = hide_secrets(text)
    if hidden is None:
        assert "ghp_" not in got and got.endswith("@github.com/o/r")
    else:
        assert got == hidden


def test_ordinary_values_are_kept() -> None:
    env = {
        "NCCL_SOCKET_IFNAME": "=eth0",
        "NCCL_IB_HCA": "^mlx5_0:1",
        "MASTER_ADDR": "gpu01.cluster",
        "PATH": "/usr/local/bin:/usr/bin",
        "SLURM_JOB_NODELIST": "gpu[01-16]",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "UCX_TLS": "rc,cuda_copy",
    }
    assert hide_env(env) == env


def test_a_command_lines_credentials() -> None:
    argv = ["python", "train.py", "--hf-token", "hf_x", "--lr", "3e-4", "--api_key=abc1234"]
    assert hide_argv(argv) == ["python", "train.py", "--hf-token", HIDDEN, "--lr", "3e-4",
                               f"--api_key={HIDDEN}"]  # fmt: skip


@given(st.text(alphabet="abcdefXYZ0123456789_-", min_size=20, max_size=40))
def test_a_url_password_never_survives(password: str) -> None:
    assert password not in hide_secrets(f"https://user:{password}@host.example/p")
