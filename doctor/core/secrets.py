"""Credentials, hidden before a capture leaves the node: by the variable's name and by the
value's shape.

The probe ships this file above its own source (doctor/stages/collect.py), so it is standard
library only and valid on Python 3.8; the pasted environment and the stacks agent's process
lines use the same rules. A value is hidden whole where its variable's name says it is a secret
(``HF_TOKEN``, ``SLURM_JWT``, ``WANDB_API_KEY``, Open MPI's ``*_precondition_transports``); any
other value keeps its shape and loses only the secret inside it: the password of a URL, a JWT, a
private key block, a provider's token (AWS, GitHub, GitLab, Slack, Hugging Face, OpenAI, Google),
and what follows ``password=``, ``token:`` and their kin (the generic rules of gitleaks and
trufflehog, written here from what they describe).
"""

import re
from typing import Dict, List  # not dict[...]: the nodes may run Python 3.8

HIDDEN = "<redacted>"

# A variable whose name holds one of these (upper-cased) is a secret, whatever its value.
NAME_MARKERS = (
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "API_KEY", "APIKEY",
    "AUTH", "JWT", "COOKIE", "SESSION_KEY", "ACCESS_KEY",
)  # fmt: skip
# ... or ends with one of these: a key, Open MPI's and PMIx's job secret.
NAME_ENDINGS = ("_KEY", "_TRANSPORTS", "_PASS", "_PWD")

_SHAPES = (
    # scheme://user:password@host: the password (the user name stays, --redact hides it).
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(@)"), r"\1" + HIDDEN + r"\2"),
    # scheme://longtoken@host: a token standing in for the user (https://ghp_...@github.com).
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]{16,}(@)"), r"\1" + HIDDEN + r"\2"),
    # A JSON Web Token: three base64url parts, the first two JSON objects ("eyJ").
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), HIDDEN),
    # A private key block, whole or cut.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----)?",
            re.S,
        ),
        HIDDEN,
    ),
    # Providers' tokens, by their documented prefixes.
    (
        re.compile(
            r"\b(?:(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}"
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
            r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
            r"|hf_[A-Za-z0-9]{30,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"
            r"|AIza[0-9A-Za-z_-]{35}|(?:sk|rk)_live_[0-9A-Za-z]{20,})\b"
        ),
        HIDDEN,
    ),
    # password=..., --token ..., "api_key": "...", secret: ... in a command line or a value.
    (
        re.compile(
            r"(?i)((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth)"
            r"[\"']?\s*(?:[=:]|\s(?=\S))\s*[\"']?)[^\s\"',;&]{3,}"
        ),
        r"\1" + HIDDEN,
    ),
)


def secret_name(name: str) -> bool:
    """Whether a variable of this name holds a credential, whatever its value."""
    upper = name.upper()
    return any(m in upper for m in NAME_MARKERS) or upper.endswith(NAME_ENDINGS)


def hide_secrets(text: str) -> str:
    """``text`` with every credential its shape gives away replaced by HIDDEN."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def hide_env(env: Dict[str, str]) -> Dict[str, str]:
    """An environment with secret variables hidden whole and secrets in other values hidden."""
    return {k: HIDDEN if secret_name(k) else hide_secrets(v) for k, v in env.items()}


def hide_argv(argv: List[str]) -> List[str]:
    """A command line with its credentials hidden: a word after a flag named for a secret
    (``--hf-token X``), and what each word's shape gives away (``--password=X``, a URL's)."""
    out = []
    for i, word in enumerate(argv):
        flag = argv[i - 1].lstrip("-").replace("-", "_") if i else ""
        after_flag = argv[i - 1].startswith("-") and "=" not in argv[i - 1] if i else False
        out.append(HIDDEN if after_flag and secret_name(flag) else hide_secrets(word))
    return out
