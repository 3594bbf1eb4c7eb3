"""Pasted ibstat, ibv_devinfo, rdma link, ibdev2netdev and show_gids give the probe's RDMA facts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.model import Missing
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.node import parse_node
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from tests.paste.pastekit import pasted, read_text, written_blocks

TOOLS = written_blocks("written-rdma-tools.txt")


def rdma_of(text: str) -> RdmaFacts:
    rdma = parse_rdma(read_text(text))
    assert isinstance(rdma, RdmaFacts), rdma
    return rdma


def ports(rdma: RdmaFacts) -> dict[str, tuple]:
    return {
        f"{h.name}/{p.number}": (p.state, p.phys_state, p.rate_gbps, p.link_layer)
        for h in rdma.hcas
        for p in h.ports
    }


def test_ibstat() -> None:
    rdma = rdma_of(pasted("written-ibstat.txt"))
    assert ports(rdma) == {
        "mlx5_0/1": (4, "LinkUp", 200.0, "InfiniBand"),
        "mlx5_1/1": (1, "Polling", 10.0, "InfiniBand"),
        "mlx5_2/1": (4, "LinkUp", 100.0, "Ethernet"),
    }
    assert rdma.hcas[0].fw_ver == "20.39.1002"
    # What ibstat never shows stays unknown.
    assert isinstance(rdma.uverbs, Missing) and isinstance(rdma.verbs_loadable, Missing)


def test_ibv_devinfo_verbose_with_elisions() -> None:
    rdma = rdma_of(pasted("written-ibv_devinfo-v.txt"))
    assert ports(rdma) == {
        "mlx5_0/1": (1, "Polling", 200.0, "InfiniBand"),
        "mlx5_2/1": (4, "LinkUp", 100.0, "Ethernet"),
    }
    roce = next(h for h in rdma.hcas if h.name == "mlx5_2").ports[0]
    assert [(g.index, g.type) for g in roce.gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2")]
    assert not any(g.routable_v2 for g in roce.gids)  # link-local only


def test_ibv_devinfo_every_port_state_and_link_layer() -> None:
    rdma = rdma_of(pasted("written-ibv_devinfo.txt"))
    states = {
        f"{h.name}/{p.number}": (p.state, p.state_text, p.link_layer, p.active)
        for h in rdma.hcas
        for p in h.ports
    }
    assert states == {
        "mlx5_0/1": (4, "ACTIVE", "InfiniBand", True),
        "mlx5_1/1": (2, "INIT", "InfiniBand", False),  # no subnet manager brought it up
        "mlx5_2/1": (3, "ARMED", "Ethernet", False),
        "mlx5_2/2": (1, "DOWN", "Ethernet", False),
    }
    # The rdma checks judge them as a probed node's: mlx5_1 and mlx5_2 have no active port.
    node = parse_node("n1", read_text(pasted("written-ibv_devinfo.txt")))
    cluster = ClusterFacts(nodes={"n1": node})
    findings = [f for o in run_checks(load_checks(), cluster) for f in o.findings]
    named = {f.summary.split(":")[0] for f in findings if f.code == "rdma.no_active_port"}
    assert named == {"mlx5_1", "mlx5_2"}


def test_rdma_link_and_ibdev2netdev() -> None:
    rdma = rdma_of(TOOLS["rdma link"])
    assert ports(rdma)["mlx5_1/1"][:2] == (1, "Polling")
    assert next(h for h in rdma.hcas if h.name == "mlx5_2").netdevs == ("ens1f0",)
    names = rdma_of(TOOLS["ibdev2netdev"])
    assert {h.name: h.netdevs for h in names.hcas} == {
        "mlx5_0": ("ib0",),
        "mlx5_1": ("ib1",),
        "mlx5_2": ("ens1f0",),
    }
    assert {p.state for h in names.hcas for p in h.ports} == {None}  # not shown: not guessed


def test_show_gids() -> None:
    rdma = rdma_of(TOOLS["show_gids"])
    [port] = rdma.hcas[0].ports
    assert [g.type for g in port.gids] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    assert port.netdevs == ("ens1f0",) and any(g.routable_v2 for g in port.gids)


def codes(text: str) -> set[str]:
    cluster = ClusterFacts(nodes={"n1": parse_node("n1", read_text(text))})
    return {f.code for o in run_checks(load_checks(), cluster) for f in o.findings}


def test_pastes_combine_and_the_rdma_check_judges_only_what_they_show() -> None:
    text = pasted("written-ibstat.txt") + TOOLS["show_gids without an IPv4 GID"]
    found = codes(text)
    # mlx5_1 has no active port; mlx5_2 is RoCE without a routable v2 GID. /dev/infiniband and
    # libibverbs were never shown, so nothing is said about them.
    assert {"rdma.no_active_port", "rdma.roce_no_v2"} <= found
    assert not found & {"rdma.no_uverbs", "rdma.no_verbs", "limits.memlock"}
    assert "rdma.no_active_port" not in codes(TOOLS["ibdev2netdev"])
    with_v2 = codes(pasted("written-ibstat.txt") + TOOLS["show_gids"])
    assert "rdma.roce_no_v2" not in with_v2


def test_no_rdma_paste_means_unknown_not_none() -> None:
    rdma = parse_rdma(read_text(pasted("netns-ip-a.txt")))
    assert isinstance(rdma, Missing) and rdma.kind == "unsupported"


# ibv_devinfo of a dual-port mlx4 (written from libibverbs' devinfo.c: the fixture's header), two
# HCAs of it, pasted under the prompt that ran it, its tab-separated fields kept, expanded, turned
# into spaces or lost by the copy, with libibverbs' stderr (libibverbs/dynamic_driver.c: PFX
# "Warning: couldn't load driver '%s': %s\n", PFX "libibverbs: "), an elision or blank lines
# between the lines that matter, as it is quoted in an issue or not.
MLX4 = written_blocks("written-ibv_devinfo-mlx4.txt")["full"]
TWO_MLX4 = MLX4 + "\n" + MLX4.replace("mlx4_0", "mlx4_1")
PROMPTS = [
    "user@host:~$ ibv_devinfo",
    "[root@gpu01 ~]# ibv_devinfo -v",
    "(base) me@node3:~/run$ /usr/bin/ibv_devinfo",
    "$ sudo ibv_devinfo",
    "root@c7a1b2:/workspace# ibv_devinfo | cat",
]
NOISE = [
    "libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': libmlx5-rdmav34.so: cannot "
    "open shared object file: No such file or directory",
    "libibverbs: Warning: couldn't load driver 'cxgb4'.",
    "...",
    "",
]
COPIES = {
    "tabs": lambda text: text,
    "expanded": lambda text: text.expandtabs(8),
    "spaces": lambda text: text.replace("\t", " "),
    "lost": lambda text: text.replace("\t", ""),
}
SHOWN = {
    "fenced": lambda text: f"```console\n{text}```\n",
    "indented": lambda text: "".join(f"    {line}\n" for line in text.splitlines()),
    "quoted": lambda text: "".join(f"> {line}\n" for line in text.splitlines()),
    "plain": lambda text: text,
}


@settings(max_examples=120, deadline=None)
@given(
    prompt=st.sampled_from(PROMPTS),
    copy=st.sampled_from(sorted(COPIES)),
    shown=st.sampled_from(sorted(SHOWN)),
    noise=st.lists(st.tuples(st.integers(1, 60), st.sampled_from(NOISE)), max_size=6),
    crlf=st.booleans(),
)
def test_ibv_devinfo_under_its_prompt_however_copied(
    prompt: str, copy: str, shown: str, noise: list[tuple[int, str]], crlf: bool
) -> None:
    lines = COPIES[copy](TWO_MLX4).splitlines()
    for at, line in sorted(noise, key=lambda x: -x[0]):
        lines.insert(min(at, len(lines)), line)
    text = SHOWN[shown]("\n".join([prompt, *lines]) + "\n")
    if crlf:
        text = text.replace("\n", "\r\n")
    rdma = rdma_of(text)
    want = {"1": (4, "InfiniBand"), "2": (1, "Ethernet")}
    assert {
        h.name: {str(p.number): (p.state, p.link_layer) for p in h.ports} for h in rdma.hcas
    } == {
        "mlx4_0": want,
        "mlx4_1": want,
    }
    assert {h.fw_ver for h in rdma.hcas} == {"2.42.5000"}
