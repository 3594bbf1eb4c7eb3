"""--redact: the same alias for a host in every format, and nothing from the facts leaks."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import re
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from builders import ALL_CHECKS, build_report, node, sample_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.model import NodeFailure
from doctor.facts.cluster import ClusterFacts
from doctor.judge.report import Report
from doctor.render.output import Format, OutputOptions, emit
from doctor.render.redact import Redactor


def render_all(report: Report) -> dict[str, str]:
    """Every format, written through the same path the CLI uses, with --redact."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {name: folder / f"r.{name}" for name in ("json", "junit", "md", "html")}
        opts = OutputOptions(
            Format.text, files["json"], files["junit"], files["md"], files["html"], redact=True
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            emit(report, opts)
        rendered = {name: path.read_text() for name, path in files.items()}
        json_out = io.StringIO()
        with contextlib.redirect_stdout(json_out):
            emit(report, OutputOptions(Format.json, redact=True))
        coloured = io.StringIO()
        with contextlib.redirect_stdout(coloured), forced_colour():
            emit(report, OutputOptions(Format.text, redact=True))
    assert "\x1b[" in coloured.getvalue()
    rendered["html"] = html_content(rendered["html"])
    return {
        "text": out.getvalue(),
        "stdout-json": json_out.getvalue(),
        "coloured-text": coloured.getvalue(),
        **rendered,
    }


class _Content(HTMLParser):
    """What an HTML report holds from its document: text and attribute values. The template's
    own words (tag and attribute names, class names, its CSS and script) are left out: names
    such as ``h3`` or ``s0`` are markup there, however a generated host may be called."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("style", "script")
        self.parts += [v or "" for k, v in attrs if k != "class"]

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def html_content(html: str) -> str:
    parser = _Content()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.parts)


@contextlib.contextmanager
def forced_colour() -> Iterator[None]:
    """FORCE_COLOR=1 for the duration (hypothesis reruns the test, so no monkeypatch fixture)."""
    before = os.environ.get("FORCE_COLOR")
    os.environ["FORCE_COLOR"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["FORCE_COLOR"]
        else:
            os.environ["FORCE_COLOR"] = before


def token(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", re.IGNORECASE)


def address(text: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![0-9A-Fa-f:.]){re.escape(text)}(?![0-9A-Fa-f:]|\.[0-9])", re.I)


def test_same_alias_for_a_host_in_every_format() -> None:
    outputs = render_all(sample_report())
    for fmt, text in outputs.items():
        assert not token("gpu01").search(text), fmt
        assert "host1" in text, fmt
    assert "host[1-4]" in outputs["text"].splitlines()[0]  # gpu[01-04], compacted again
    assert "nodes: 4 (host[1-4])" in outputs["md"]
    assert '<testsuite name="host1"' in outputs["junit"]
    doc = json.loads(outputs["json"])
    assert list(doc["nodes"]) == ["host1", "host2", "host3", "host4"]
    # The address and the user name are masked alike in every format.
    assert all("198.18.0.1" not in t and "alice" not in t for t in outputs.values())
    aliases = {re.search(r"rendezvous at (\w+)", t).group(1) for t in outputs.values()}  # type: ignore[union-attr]
    assert aliases == {"ipv41"}


def test_loopback_root_and_times_are_kept() -> None:
    r = Redactor([["gpu01"]], ["alice"])
    assert r.text("gloo bound to 127.0.1.1 as root at 03:04:05") == (
        "gloo bound to 127.0.1.1 as root at 03:04:05"
    )
    assert r.text("alice@gpu01 fe80::1%eth0 aa:bb:cc:dd:ee:ff") == "user1@host1 ipv61%eth0 mac1"


def test_names_right_after_colour_codes_are_masked() -> None:
    r = Redactor([["gpu01"]], [])
    assert r.text("\x1b[2mgpu01\x1b[0m on gpu01") == "\x1b[2mhost1\x1b[0m on host1"


def test_names_are_whole_tokens_and_aliases_never_collide() -> None:
    r = Redactor([["node1"], ["host1"]], ["user1"])
    assert r.text("node1 node10 host1 user1") == "host2 node10 host3 user2"


def test_unknown_bracket_groups_keep_their_shape() -> None:
    r = Redactor([["gpu01"], ["gpu02"]], [])
    assert r.text("on gpu[01-02] and cpu[1-2] and [0,1]") == "on host[1-2] and cpu[1-2] and [0,1]"


hostnames = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}[0-9]\Z")
users = st.from_regex(r"\A[a-z][a-z0-9_]{2,10}\Z").filter(lambda u: u != "root")
ipv4 = st.ip_addresses(v=4).filter(lambda ip: not (ip.is_loopback or ip.is_unspecified))
ipv6 = st.ip_addresses(v=6).filter(
    lambda ip: not (ip.is_loopback or ip.is_unspecified or ip.ipv4_mapped)
)
macs = st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hosts=st.lists(hostnames, min_size=2, max_size=4, unique_by=str.lower),
    user=users,
    home_user=users,
    v4=st.lists(ipv4, min_size=2, max_size=2, unique=True),
    v6=ipv6,
    mac=macs,
    peer=hostnames,
    peer_user=users,
)
def test_redact_never_leaks_what_the_facts_name(
    hosts: list[str],
    user: str,
    home_user: str,
    v4: list[ipaddress.IPv4Address],
    v6: ipaddress.IPv6Address,
    mac: str,
    peer: str,
    peer_user: str,
) -> None:
    *reachable, lost = hosts
    env = {"USER": user, "MASTER_ADDR": str(v4[0]), "SSH_CONNECTION": f"{v4[1]} 22 {v6} 22"}
    cluster = ClusterFacts(
        nodes={
            h: node(h, env=env, home=f"/home/{home_user}", fqdn=f"{h}.cluster.example")
            for h in reachable
        }
    )
    cluster.failures[lost] = NodeFailure(lost, "node.timeout", f"{lost} did not answer", str(v4[1]))
    sections = {
        "nics": [{"node": h, "address": f"{v6}/64", "mac": mac} for h in reachable],
        # Names only a stage saw (a peer in /etc/hosts, an ssh_config login).
        "peers": [{"host": peer, "user": peer_user, "via": f"{peer}.{reachable[0]}.example"}],
    }
    report = build_report(cluster, ALL_CHECKS, sections)
    secrets_by_token = [*hosts, user, home_user, peer, peer_user]
    addresses = [str(v4[0]), str(v4[1]), str(v6), mac]
    for fmt, text in render_all(report).items():
        for secret in secrets_by_token:
            assert not token(secret).search(text), (fmt, secret)
        for secret in addresses:
            assert not address(secret).search(text), (fmt, secret)
