"""The environment a library really sees: process env plus NCCL and Open MPI config files."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.facts.nccl.libraries import NcclFacts
from doctor.facts.network.net import NetFacts

SYSTEM_MCA_CONF = "/etc/openmpi/openmpi-mca-params.conf"


@dataclass(frozen=True)
class Setting:
    value: str
    source: str  # "env" or the config file it came from


def parse_mca_conf(text: str) -> dict[str, str]:
    """Open MPI mca-params.conf: 'name = value' lines, '#' comments, whitespace trimmed."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if sep:
            out[name.strip()] = value.strip()
    return out


def nccl_settings(env: dict[str, str], nccl: NcclFacts | None) -> dict[str, Setting]:
    """NCCL_* as NCCL sees them: env > $NCCL_CONF_FILE (else ~/.nccl.conf) > /etc/nccl.conf.

    NCCL loads the files with setenv(name, value, 0), so whatever is already set wins.
    """
    out = {k: Setting(v, "env") for k, v in env.items() if k.startswith("NCCL_")}
    for conf in nccl.conf_files if nccl is not None else ():
        if isinstance(conf.settings, tuple):
            for name, value in conf.settings:
                out.setdefault(name, Setting(value, conf.path))
    return out


def mca_settings(env: dict[str, str], net: NetFacts) -> dict[str, Setting]:
    """Open MPI MCA parameters: OMPI_MCA_* env > ~/.openmpi/mca-params.conf > system file."""
    out = {
        k[len("OMPI_MCA_") :]: Setting(v, "env")
        for k, v in env.items()
        if k.startswith("OMPI_MCA_")
    }
    paths = []
    if "HOME" in env:
        paths.append(env["HOME"] + "/.openmpi/mca-params.conf")
    paths.append(SYSTEM_MCA_CONF)
    paths += sorted(p for p in net.files if p.endswith("/etc/openmpi-mca-params.conf"))
    for path in dict.fromkeys(paths):
        if path in net.files:
            for name, value in parse_mca_conf(net.files[path]).items():
                out.setdefault(name, Setting(value, path))
    return out
