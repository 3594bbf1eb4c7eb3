"""A printed fix command is one command whatever a name holds: people paste them into root shells.

Every value from outside reaches a command through doctor/core/shell.py, which quotes it. Three
layers of tests: the tree builds every command with a constant template (no f-string, no format
of a value); every template in the tree, filled with shell metacharacters, parses (shlex) to the
same operators as with plain names and keeps each value one word; and the reported case end to
end, a node whose hostname is ``a';id;echo '``.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checks.cluster import names_resolve
from doctor.core.shell import WITHHELD, command, over_ssh
from tests.checks.test_cluster_checks import ADDR, cluster, node

REPO = Path(__file__).resolve().parents[2]
BUILDERS = {"command", "commands", "over_ssh", "words", "assignments"}
# Where a Command is made from a str that is no template: the module that makes them, the job
# check, which passes on the catalogue's own commands (never text of a log), and the catalogue,
# which reads them from its own file (doctor/explain/signatures.json, shipped with the doctor).
CASTS = {"doctor/core/shell.py", "checks/job.py", "doctor/explain/catalogue.py"}


def _tree() -> list[tuple[str, ast.Module]]:
    files = [*REPO.joinpath("doctor").rglob("*.py"), *REPO.joinpath("checks").rglob("*.py")]
    return [(str(f.relative_to(REPO)), ast.parse(f.read_text())) for f in files]


def _shell_names(tree: ast.Module) -> set[str]:
    """The names a module imported from doctor.core.shell (or doctor.plugin, which re-exports)."""
    return {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module in ("doctor.core.shell", "doctor.plugin")
        for a in n.names
    }


def _templates() -> list[str]:
    found = []
    for where, tree in _tree():
        names = _shell_names(tree) | (
            {"command", "over_ssh"} if where.endswith("shell.py") else set()
        )
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            name = call.func.id
            if name in ("command", "over_ssh") and name in names and where not in CASTS:
                template = call.args[1 if name == "over_ssh" else 0]
                assert isinstance(template, ast.Constant), (
                    f"{where}:{call.lineno}: a built template"
                )
                found.append(template.value)
            elif name == "commands" and name in names and where not in CASTS:
                assert all(isinstance(a, ast.Constant) for a in call.args), f"{where}:{call.lineno}"
            elif name == "Command" and "Command" in names and where not in CASTS:
                pytest.fail(f"{where}:{call.lineno}: a Command cast from a str")
    return found


TEMPLATES = _templates()


def _whole_commands() -> set[str]:
    """Module constants that hold a whole command (``DMESG = command("sudo dmesg ...")``)."""
    return {
        target.id
        for _, tree in _tree()
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id in ("command", "commands")
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_no_whole_command_is_quoted_as_a_value() -> None:
    """A command given to ``command()`` as a value is quoted into one word: ``'sudo dmesg -T |
    tail' | grep sxid`` runs a program of that name. Only ``over_ssh`` quotes one, on purpose."""
    constants = _whole_commands()
    assert "DMESG" in constants  # the scan found them
    wrong = [
        f"{where}:{call.lineno}"
        for where, tree in _tree()
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "command"
        and any(isinstance(a, ast.Name) and a.id in constants for a in call.args[1:])
    ]
    assert not wrong


def test_the_tree_builds_commands_from_constant_templates() -> None:
    assert len(TEMPLATES) > 40  # every check's commands: the scan found them


def _words(line: str) -> list[str]:
    """The shell's words, quotes removed (a comment dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _operators(line: str) -> list[str]:
    """The characters a POSIX shell reads as operators or substitutions: outside single quotes,
    outside double quotes (but $ and ` there), not escaped, before a comment."""
    found, quote, i = [], "", 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is taken as it is
        elif quote == '"':
            if c == '"':
                quote = ""
            elif c in "$`":
                found.append(c)
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        elif c in ";&|()<>$`":
            found.append(c)
        i += 1
    return found


METAS = st.text(alphabet=";|&$`'\"\\()<>*?[]{}!# ~abc\t", min_size=1, max_size=12)


@pytest.mark.parametrize("template", sorted(set(TEMPLATES)))
@settings(max_examples=30)
@given(value=METAS)
def test_every_template_keeps_a_value_one_word(template: str, value: str) -> None:
    fields = template.count("{}") or len({f for f in ("{0}", "{1}") if f in template})
    plain = command(template, *["plainvalue"] * fields)
    hostile = command(template, *[value] * fields)
    if hostile == WITHHELD:
        assert "\t" in value  # a control character withholds the command, nothing else does
        return
    plain_words, hostile_words = _words(plain), _words(hostile)
    assert _operators(hostile) == _operators(plain)
    assert len(hostile_words) == len(plain_words)  # the value took the place of one word
    for p, h in zip(plain_words, hostile_words, strict=True):
        if p != h:
            assert h == p.replace("plainvalue", value)


@given(node_name=METAS, value=METAS)
def test_a_remote_command_quotes_twice(node_name: str, value: str) -> None:
    line = over_ssh(node_name, "getent hosts {}", value)
    if line == WITHHELD:
        return
    ssh, host, remote = _words(line)
    assert (ssh, host) == ("ssh", node_name)
    assert _words(remote) == ["getent", "hosts", value]


def _hosts_fix(hostname: str) -> tuple[str, ...]:
    resolved = {**{n: (a,) for n, a in ADDR.items()}, hostname: ("127.0.1.1",)}
    facts = cluster(node("n1", hostname=hostname, resolved=resolved), node("n2"), node("n3"))
    [finding] = list(names_resolve.fn(facts))
    assert finding.code == "names.loopback" and finding.fix is not None
    return finding.fix.commands


@pytest.mark.parametrize("evil", ["a';id;echo '", "$(reboot)", "`id`", "a\nid", "x|sh"])
def test_a_hostile_hostname_in_the_hosts_fix(evil: str) -> None:
    """The reported case: the /etc/hosts lines for a node whose hostname is hostile are the
    commands they are for a plain one, the name one word in them (or withheld)."""
    for plain, line in zip(_hosts_fix("plainhost"), _hosts_fix(evil), strict=True):
        if "\n" in evil:
            assert evil not in line
            continue
        assert _operators(line) == _operators(plain)
        assert _words(line) == [w.replace("plainhost", evil) for w in _words(plain)]
