"""The known_hosts index answers exactly what paramiko's own HostKeys would, on any file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.nodes.transport import known_hosts
from doctor.nodes.transport.known_hosts import KnownHosts

NAMES = ["node1", "10.0.0.7", "[node2]:2222", "gpu01.example.com"]


@pytest.fixture(scope="module")
def public_keys(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``type base64`` of real keys made by OpenSSH's ssh-keygen, two of one type."""
    folder = tmp_path_factory.mktemp("keys")
    keys = []
    for i, kind in enumerate(["ed25519", "ed25519", "ecdsa", "rsa"]):
        path = folder / f"k{i}"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, timeout=60
        )
        keys.append(" ".join(path.with_suffix(".pub").read_text().split()[:2]))
    return keys


def _field(name: str, hashed: bool) -> str:
    return paramiko.HostKeys.hash_host(name) if hashed else name


entry = st.tuples(
    st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), min_size=1, max_size=3),
    st.integers(0, 3),
    st.sampled_from(["", "#", "@cert-authority ", "@revoked ", "  ", "\t"]),
)
noise = st.sampled_from(
    ["", "# comment", "node1", "node1 ssh-ed25519", "node1 ssh-ed25519 !!notbase64!!", "x y z"]
)


def _lines(public_keys: list[str], entries: list, noises: list[str]) -> list[str]:
    lines = []
    for (names, key, prefix), junk in zip(entries, noises + [""] * len(entries), strict=False):
        field = ",".join(_field(n, h) for n, h in names)
        lines += [f"{prefix}{field} {public_keys[key]}", junk]
    return lines


def _decodes(line: str) -> bool:
    try:
        paramiko.hostkeys.HostKeyEntry.from_line(line.strip())
    except paramiko.hostkeys.InvalidHostKey:
        return False
    except paramiko.SSHException:
        pass
    return True


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(entry, max_size=8), st.lists(noise, max_size=8))
def test_same_keys_as_paramiko_for_every_name(public_keys, tmp_path, entries, noises):
    path = tmp_path / "known_hosts"
    path.write_text("\n".join(_lines(public_keys, entries, noises)) + "\n")
    ours = KnownHosts([path])
    # paramiko's load raises on a line with bad base64 (OpenSSH skips it, and so do we): it
    # reads the file without those lines.
    loadable = tmp_path / "loadable"
    loadable.write_text("\n".join(line for line in path.read_text().splitlines() if _decodes(line)))
    theirs = paramiko.HostKeys(str(loadable))
    for name in NAMES:
        expected = dict((theirs.lookup(name) or {}).items())
        assert ours.keys_for(name) == expected, name


def test_lines_hashed_by_openssh_are_found(public_keys, tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text(f"gpu01.example.com {public_keys[0]}\n[node2]:2222 {public_keys[2]}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert "gpu01" not in path.read_text()
    index = KnownHosts([path])
    assert [k.get_base64() for k in index.keys_for("gpu01.example.com").values()] == [
        public_keys[0].split()[1]
    ]
    assert list(index.keys_for("[node2]:2222")) == [public_keys[2].split()[0]]
    assert index.keys_for("node2") == {}


def test_a_line_with_a_broken_key_does_not_hide_the_others(public_keys, tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text(f"node1 ssh-ed25519 AAAA!broken\nnode1 {public_keys[0]}\n")
    with pytest.raises(paramiko.hostkeys.InvalidHostKey):
        paramiko.HostKeys(str(path))  # what the transport used to call, once per node
    assert list(KnownHosts([path]).keys_for("node1")) == ["ssh-ed25519"]


def test_files_missing_or_unreadable_are_read_past(public_keys, tmp_path):
    good = tmp_path / "good"
    good.write_text(f"node1 {public_keys[0]}\n")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    index = KnownHosts([tmp_path / "missing", folder, good])
    assert list(index.keys_for("node1")) == ["ssh-ed25519"]


def test_each_file_is_read_once_however_many_lookups(public_keys, tmp_path, monkeypatch):
    path = tmp_path / "known_hosts"
    path.write_text(f"node1 {public_keys[0]}\n" * 3)
    reads: list[Path] = []
    original = known_hosts.read_bounded

    def counted(path: Path, limit: int) -> bytes:
        reads.append(path)
        return original(path, limit)

    monkeypatch.setattr(known_hosts, "read_bounded", counted)
    index = KnownHosts([path])
    for _ in range(5):
        assert list(index.keys_for("node1")) == ["ssh-ed25519"]
    assert reads == [path]
