"""Drift across nodes: the same driver, CUDA, NCCL, MPI, Python, torch, kernel and NCCL settings."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.facts.nccl.libraries import LOGGED
from doctor.facts.node import NodeFacts
from doctor.judge.drift import drift_findings, find_drift, need_drift
from doctor.plugin import CheckSpec, cluster_check

Value = Hashable | Missing


@dataclass(frozen=True)
class Rule:
    """One value that must agree across nodes, and what to say when it does not."""

    code: str
    meaning: str  # the code's one-line meaning, for the check's ``codes``
    what: str
    value_of: Callable[[NodeFacts], Value]
    severity: Severity
    fix: Callable[[Hashable], Fix]  # given the reference value (the majority's or baseline's)
    nothing: Hashable = None  # the value of a node that has none of it (see need_drift)

    def findings(self, cluster: ClusterFacts) -> Iterator[Finding]:
        split = find_drift(cluster, self.value_of)
        if split is None:
            return
        yield from drift_findings(
            cluster,
            self.value_of,
            code=self.code,
            what=self.what,
            severity=self.severity,
            fix=self.fix(split.reference),
        )


def codes(rules: tuple[Rule, ...]) -> dict[str, str]:
    return {rule.code: rule.meaning for rule in rules}


NONE = "none"  # what a node has of a list it has nothing of


def _joined(items: list[str] | tuple[str, ...]) -> str:
    return ", ".join(sorted(items)) if items else NONE


# -- values, one per node (Missing leaves the node out of the vote) -----------------------


def driver_version(f: NodeFacts) -> Value:
    return f.driver if isinstance(f.driver, Missing) else f.driver.version


def cuda_driver_version(f: NodeFacts) -> Value:
    return f.driver if isinstance(f.driver, Missing) else f.driver.cuda_version


def nccl_versions(f: NodeFacts) -> Value:
    if isinstance(f.nccl, Missing):
        return f.nccl
    versions = {
        f"RCCL {v.version}" if v.rccl else v.version
        for v in f.nccl.libraries
        if isinstance(v.version, str)
    }
    if not versions and any(isinstance(v.version, Missing) for v in f.nccl.libraries):
        # A library was found (or a pasted log shows one) without its version: not "none".
        return Missing("no NCCL version shown", "absent")
    return _joined(list(versions))


def torch_nccl_version(f: NodeFacts) -> Value:
    """The NCCL torch loads: the probed library, else what an imported torch reported."""
    if isinstance(f.nccl, Missing) or not isinstance(f.nccl.torch_pick, str):
        runtime = None if isinstance(f.frameworks, Missing) else f.frameworks.torch
        if runtime is not None and not isinstance(runtime.runtime, Missing | None):
            return runtime.runtime.nccl or Missing("torch has no NCCL", "absent")
        return Missing("torch loads no separate libnccl here", "absent")
    lib = f.nccl.library(f.nccl.torch_pick)
    return lib.version if lib is not None else Missing("not probed", "absent")


def net_plugins(f: NodeFacts) -> Value:
    if isinstance(f.nccl, Missing):
        return f.nccl
    if all(lib.path == LOGGED for lib in f.nccl.libraries) and f.nccl.log is not None:
        # Only a pasted NCCL log: no library search, so no plugin files were looked for.
        return Missing("no NCCL net plugin files were looked for (a pasted log)", "unsupported")
    return _joined([p.rsplit("/", 1)[-1] for p in f.nccl.net_plugins])


def mpi_version(f: NodeFacts) -> Value:
    if isinstance(f.mpi, Missing):
        return f.mpi
    if isinstance(f.mpi.implementation, Missing) or isinstance(f.mpi.version, Missing):
        return Missing("mpirun version not recognised", "failed")
    return f"{f.mpi.implementation} {f.mpi.version}"


def python_version(f: NodeFacts) -> Value:
    return f.system if isinstance(f.system, Missing) else f.system.python


def kernel_version(f: NodeFacts) -> Value:
    return f.system if isinstance(f.system, Missing) else f.system.kernel


def torch_version(f: NodeFacts) -> Value:
    torch = None if isinstance(f.frameworks, Missing) else f.frameworks.torch
    return Missing("no torch", "absent") if torch is None else torch.package.version


def nccl_conf(f: NodeFacts) -> Value:
    """The settings NCCL takes from its config files (user file over /etc/nccl.conf)."""
    if isinstance(f.nccl, Missing):
        return f.nccl
    merged: dict[str, str] = {}
    for conf in reversed(f.nccl.conf_files):  # lowest precedence first
        if not isinstance(conf.settings, Missing):
            merged.update(conf.settings)
    return _joined([f"{k}={v}" for k, v in merged.items()])


def nccl_env(f: NodeFacts) -> dict[str, str] | Missing:
    if isinstance(f.env, Missing):
        return f.env
    return {k: v for k, v in f.env.items() if k.startswith("NCCL_")}


# -- checks -------------------------------------------------------------------------------

DRIVER = (
    Rule(
        "drift.driver",
        "the NVIDIA driver version differs between nodes",
        "NVIDIA driver",
        driver_version,
        Severity.WARN,
        lambda ref: Fix(
            f"Install driver {ref} on every node (then reboot or reload the module).",
            commands("nvidia-smi --query-gpu=driver_version --format=csv,noheader"),
        ),
    ),
    Rule(
        "drift.cuda_driver",
        "the CUDA driver API version differs between nodes",
        "CUDA driver version",
        cuda_driver_version,
        Severity.WARN,
        lambda ref: Fix(f"Install the driver that provides CUDA {ref} on every node."),
    ),
)
NCCL = (
    Rule(
        "drift.nccl",
        "the set of NCCL versions reachable differs between nodes",
        "NCCL versions reachable",
        nccl_versions,
        Severity.WARN,
        lambda ref: Fix(
            f"Make every node reach the same NCCL versions (expected: {ref}): remove the extra "
            "copies, or install the missing one."
        ),
        NONE,
    ),
    Rule(
        "drift.nccl_torch",
        "torch loads a different NCCL version on some nodes",
        "torch's NCCL",
        torch_nccl_version,
        Severity.FAIL,
        lambda ref: Fix(
            f"Install NCCL {ref} on every node: mixed versions hang or fail at init "
            "('Mismatched NCCL version detected').",
            (command("pip install nvidia-nccl-cu12=={}", ref),),
        ),
    ),
    Rule(
        "drift.nccl_net_plugins",
        "NCCL net plugins (libnccl-net*.so) differ between nodes",
        "NCCL net plugins",
        net_plugins,
        Severity.WARN,
        lambda ref: Fix(
            f"Give every node the same NCCL net plugins (expected: {ref}): a node without the "
            "IB/EFA plugin falls back to TCP sockets and slows or breaks the whole job.",
            commands("ldconfig -p | grep libnccl-net"),
        ),
        NONE,
    ),
)
SOFTWARE = (
    Rule(
        "drift.mpi",
        "the MPI implementation or version differs between nodes",
        "MPI",
        mpi_version,
        Severity.FAIL,
        lambda ref: Fix(f"Install {ref} on every node: mpirun needs the same MPI everywhere."),
    ),
    Rule(
        "drift.python",
        "the Python version differs between nodes",
        "Python",
        python_version,
        Severity.WARN,
        lambda ref: Fix(f"Use Python {ref} on every node (same virtualenv or container image)."),
    ),
    Rule(
        "drift.torch",
        "the torch version differs between nodes",
        "torch",
        torch_version,
        Severity.FAIL,
        lambda ref: Fix(
            f"Install torch {ref} on every node.", (command("pip install torch=={}", ref),)
        ),
    ),
    Rule(
        "drift.kernel",
        "the Linux kernel version differs between nodes",
        "Linux kernel",
        kernel_version,
        Severity.INFO,
        lambda ref: Fix(f"Nodes usually run the same kernel ({ref}); check the odd ones."),
    ),
)
NCCL_CONF = Rule(
    "drift.nccl_conf",
    "the settings in nccl.conf files differ between nodes",
    "nccl.conf settings",
    nccl_conf,
    Severity.WARN,
    lambda ref: Fix(
        f"Give every node the same nccl.conf settings (expected: {ref}) in /etc/nccl.conf "
        "and ~/.nccl.conf.",
        commands("cat /etc/nccl.conf ~/.nccl.conf"),
    ),
    NONE,
)
NCCL_ENV_CODE = "drift.nccl_env"
UNSET = "<unset>"


def nccl_env_rule(key: str) -> Rule:
    """One rule per NCCL_* variable, so the finding names exactly the variable that differs."""

    def value_of(f: NodeFacts) -> Value:
        env = nccl_env(f)
        if isinstance(env, Missing) or key in env:
            return env if isinstance(env, Missing) else env[key]
        if f.capture.raw["probe"].get("source") == "paste":
            # A pasted environment is often grepped (`env | grep NCCL_IB`): what it does not
            # show is not shown, not unset; a probed node's environment is whole.
            return Missing(f"{key} is not in the pasted environment", "absent")
        return UNSET

    def fix(ref: Hashable) -> Fix:
        how = command("unset {}", key) if ref == UNSET else command("export {}={}", key, ref)
        return Fix(
            f"Set {key} the same way on every node (some values, like interface names, may "
            "differ on purpose: then ignore this).",
            (how,),
        )

    meaning = "an NCCL_* environment variable differs between nodes"
    return Rule(NCCL_ENV_CODE, meaning, key, value_of, Severity.WARN, fix, UNSET)


def need_rules(cluster: ClusterFacts, subject: str, rules: list[Rule]) -> None:
    """Skip the calling check unless some rule has values to compare (see need_drift)."""
    need_drift(cluster, subject, *((rule.value_of, rule.nothing) for rule in rules))


def rules_check(id: str, title: str, subject: str, rules: tuple[Rule, ...]) -> CheckSpec:
    """A cluster check that applies each rule in turn; ``subject`` names what the rules compare,
    for the reason it skips when they have nothing to compare."""

    def check(cluster: ClusterFacts) -> Iterator[Finding]:
        need_rules(cluster, subject, list(rules))
        for rule in rules:
            yield from rule.findings(cluster)

    return cluster_check(id, title, codes=codes(rules))(check)


driver_drift = rules_check(
    "versions.driver",
    "Every node runs the same NVIDIA driver and CUDA driver version",
    "an NVIDIA driver",
    DRIVER,
)
nccl_drift = rules_check(
    "versions.nccl",
    "Every node has the same NCCL versions, the same one for torch, and the same net plugins",
    "NCCL or an NCCL net plugin",
    NCCL,
)
software_drift = rules_check(
    "versions.software",
    "Every node runs the same MPI, Python, torch and kernel",
    "MPI, Python, torch or a kernel version read",
    SOFTWARE,
)


@cluster_check(
    "versions.nccl_settings",
    "Every node gives NCCL the same NCCL_* environment and nccl.conf settings",
    codes=codes((nccl_env_rule("NCCL_*"), NCCL_CONF)),
)
def nccl_settings_drift(cluster: ClusterFacts) -> Iterator[Finding]:
    keys: set[str] = set()
    for facts in cluster.nodes.values():
        env = nccl_env(facts)
        keys.update(env if isinstance(env, dict) else ())
    rules = [*(nccl_env_rule(key) for key in sorted(keys)), NCCL_CONF]
    need_rules(cluster, "an NCCL_* variable or an nccl.conf setting", rules)
    for rule in rules:
        yield from rule.findings(cluster)


CHECKS = [driver_drift, nccl_drift, software_drift, nccl_settings_drift]
