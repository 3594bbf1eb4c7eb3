"""The probe's contract: stdlib only, Python 3.8 syntax, runs from stdin, deadlines, read-only."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from importlib import metadata

from doctor.core.capture import Capture
from doctor.facts.node import parse_node
from doctor.stages.collect import probe_argv, probe_source
from tests.cluster.netns import netns
from tests.conftest import run_probe

OPTIONAL = {"psutil", "pynvml"}  # used only when importable, inside try/except ImportError


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(top-level module, guarded by an ImportError handler) for every import in the probe."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "Exception")
            for h in node.handlers
        ):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], id(node) in guarded) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module.split(".")[0], id(node) in guarded))
    return found


def test_probe_is_python38_syntax() -> None:
    ast.parse(probe_source(), feature_version=(3, 8))


def _shipped_above(tree: ast.Module) -> set[int]:
    """The imports of the fallback for a run from the tree (``if "hide_env" not in globals():``):
    shipped, the names are defined above, and the block never runs."""
    found: set[int] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.ops[0], ast.NotIn)
            and ast.unparse(node.test.comparators[0]) == "globals()"
        ):
            name = ast.literal_eval(node.test.left)
            assert name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            found.update(id(n) for n in ast.walk(node) if isinstance(n, ast.ImportFrom))
    return found


def test_probe_imports_only_the_standard_library() -> None:
    tree = ast.parse(probe_source())
    imports = _imports(tree)
    assert imports, "the probe must import something; the scan found nothing"
    fallback = _shipped_above(tree)
    assert fallback, "the probe's shipped credential rules: their fallback import is gone"
    defined = {d.name for d in tree.body if isinstance(d, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("doctor"):
            # Only the fallback imports the project, and only what is shipped above it.
            assert id(node) in fallback and {a.name for a in node.names} <= defined
    for module, is_guarded in imports:
        if module in sys.stdlib_module_names or module == "doctor":  # the fallback, just checked
            continue
        assert module in OPTIONAL and is_guarded, f"probe imports non-stdlib {module!r}"


def test_probe_runs_on_a_bare_interpreter() -> None:
    # -I -S and an empty environment: no site-packages, as on a node with only an interpreter.
    raw = run_probe(prefix=["env", "-i", f"PATH={os.environ['PATH']}"], flags=("-I", "-S"))
    facts = parse_node("bare", Capture(raw))
    assert facts.system and facts.system.hostname == os.uname().nodename
    assert all(section["ok"] for section in raw["probe"]["sections"].values())


def test_probe_in_a_network_namespace_sees_that_namespace() -> None:
    with netns("cdp") as ns:
        ns.add_nic("eth7", "198.18.77.1/24")
        raw = run_probe(
            {"commands": {"ifaces": ["ls", "/sys/class/net"]}},
            prefix=["ip", "netns", "exec", ns.name],
        )
    facts = parse_node("ns", Capture(raw))
    assert facts.system and facts.system.cpus >= 1
    assert facts.limits and facts.limits.shm_size
    # `ip netns exec` remounts /sys: the probe sees the namespace's interfaces, not the host's.
    assert raw["commands"]["extra:ifaces"]["stdout"].split() == ["eth7", "lo"]


def test_command_timeout_kills_the_whole_process_group() -> None:
    marker = "31.4159"  # an argument no other process on this machine uses
    started = time.monotonic()
    raw = run_probe(
        {
            "command_timeout": 0.5,
            "commands": {"hang": ["sh", "-c", f"sleep {marker} & sleep {marker}; wait"]},
        }
    )
    assert time.monotonic() - started < 10
    entry = raw["commands"]["extra:hang"]
    assert entry["error"]["kind"] == "timeout"
    time.sleep(0.2)
    leftovers = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        leftovers.append(pid)
            except OSError:
                pass
    assert not leftovers, f"processes left behind: {leftovers}"


def test_missing_and_unknown_things_are_recorded_not_raised() -> None:
    raw = run_probe(
        {
            "files": ["/nonexistent/cluster-doctor"],
            "commands": {"nope": ["cluster-doctor-no-such-command"]},
        }
    )
    cap = Capture(raw)
    missing = cap.file("/nonexistent/cluster-doctor")
    assert not missing and missing.kind == "absent"
    cmd = cap.command("extra:nope")
    assert not cmd and cmd.kind == "absent"


def test_secret_looking_environment_values_are_redacted() -> None:
    env = dict(os.environ, NCCL_SOCKET_IFNAME="eth0", HOROVOD_API_TOKEN="hunter2-secret")
    raw = run_probe(env=env)
    captured = raw["values"]["env"]["value"]
    assert captured["NCCL_SOCKET_IFNAME"] == "eth0"
    assert captured["HOROVOD_API_TOKEN"] == "<redacted>"
    assert "hunter2-secret" not in str(raw)


def test_probe_answers_by_its_deadline_when_a_section_hangs() -> None:
    # A command that ignores its own timeout cannot exist (the group is killed), so hang a
    # section the way a stuck NFS home would: reading a FIFO nobody writes to.
    fifo = f"/tmp/cluster-doctor-fifo-{os.getpid()}"
    os.mkfifo(fifo)
    try:
        started = time.monotonic()
        raw = run_probe({"deadline": 1.0, "files": [fifo]})
        elapsed = time.monotonic() - started
    finally:
        os.unlink(fifo)
    assert elapsed < 5
    assert raw["probe"]["sections"]["extra"]["ok"] is False
    assert "timeout" in raw["probe"]["sections"]["extra"]["error"]
    assert raw["probe"]["sections"]["system"]["ok"] is True


def test_probe_finds_the_installed_cluster_doctor_as_importlib_metadata_does() -> None:
    assert Capture(run_probe()).value("doctor_version") == metadata.version("cluster-doctor")
    # -S: no site-packages, so nothing installed there is seen.
    assert Capture(run_probe(flags=("-S",))).value("doctor_version") is None


def test_the_program_is_read_in_one_go_even_under_pythonunbuffered() -> None:
    # /proc/self/io counts this process's read calls; `python -` under PYTHONUNBUFFERED would
    # make one per byte of the program (the probe's 38 KB: 38,000 reads).
    source = probe_source().replace(b'if __name__ == "__main__":', b"if False:")
    source += b"\nprint(open('/proc/self/io').read().split('syscr: ')[1].split()[0])\n"
    interpreter, *rest = probe_argv(sys.executable, {})
    proc = subprocess.run(
        [interpreter, *rest],
        input=source,
        capture_output=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=60,
        check=True,
    )
    assert len(source) > 30_000
    assert int(proc.stdout) < 2_000
