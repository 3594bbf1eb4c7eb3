#!/usr/bin/env python3
"""Install cluster-doctor from this checkout if it is not installed yet, then run it.

    python3 install.py                  # then `doctor preflight` on this node
    python3 install.py nics --export    # then any other doctor command

It needs only python3 (3.10 or newer): no root, no system package, nothing installed outside this
checkout. Where the doctor goes:
* into the active virtualenv or conda environment, when one is active (as `pip install -e .`);
* else into .venv in this checkout, made on the first run: a distribution's own Python refuses
  pip installs (PEP 668), and installing into the system's Python is not this script's to do.
A Python without ensurepip (Debian's and Ubuntu's python3 without their python3-venv package)
gets pip from a wheel whose version and sha256 are pinned below, taken from the package index pip
is set up to use (PIP_INDEX_URL, or index-url in pip.conf; else PyPI) with pip's CA certificates
(PIP_CERT, or cert in pip.conf). Everything else comes
through pip from that index. A second run installs nothing and goes straight to the doctor;
afterwards .venv/bin/doctor is the doctor (or `source .venv/bin/activate`).

Standard library only, and the syntax of old Pythons: it must get as far as saying what is wrong
on a Python too old to run the doctor.
"""

import configparser
import hashlib
import html.parser
import os
import shlex
import ssl
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent
VENV = REPO / ".venv"
OLDEST = (3, 10)  # pyproject.toml's requires-python
PIP_WHEEL = "pip-26.3-py3-none-any.whl"
PIP_SHA256 = "f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13"
PYPI = "https://pypi.org/simple"

# Exit 1 unless this checkout is what `import doctor` finds, installed with every requirement
# pyproject.toml names (with the extras given after the path) satisfied. Run from "/", so that
# the checkout is not imported merely for being the working directory.
INSTALLED = r"""
import importlib.metadata as md, sys
from pathlib import Path
try:
    import tomllib
except ImportError:
    try:
        import tomli as tomllib
    except ImportError:
        sys.exit(1)
try:
    from packaging.requirements import Requirement
except ImportError:  # pip's own copy: pip is in every environment this script installs into
    from pip._vendor.packaging.requirements import Requirement
try:
    import doctor
except ImportError:
    sys.exit(1)
repo = Path(sys.argv[1])
if Path(doctor.__file__).resolve().parent.parent != repo:
    sys.exit(1)
project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
extras = project.get("optional-dependencies", {})
wanted = list(project["dependencies"])
for extra in sys.argv[2:]:
    wanted += extras.get(extra, [])
for text in wanted:
    req = Requirement(text)
    if req.marker and not req.marker.evaluate():
        continue
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        sys.exit(1)
    if not req.specifier.contains(version, prereleases=True):
        sys.exit(1)
"""


class Failed(Exception):
    """A step that cannot go on: its one line is all the user sees."""


def say(text):
    print(f"install.py: {text}", file=sys.stderr, flush=True)


def run(argv):
    say(shlex.join(argv))
    if subprocess.run(argv, stdout=sys.stderr, check=False).returncode != 0:
        raise Failed(f"failed: {shlex.join(argv)}")


def quiet(argv):
    """Whether a command succeeds, run from / (its output is not shown)."""
    try:
        return subprocess.run(argv, capture_output=True, cwd="/", check=False).returncode == 0
    except OSError:  # no such program (yet)
        return False


def installed(python, extras=()):
    """Whether ``python`` has this checkout installed with everything it requires."""
    return quiet([python, "-c", INSTALLED, str(REPO), *extras])


def active_environment():
    """The Python of the virtualenv or conda environment this runs in, if any."""
    if sys.prefix != sys.base_prefix or Path(sys.prefix, "conda-meta").is_dir():
        return sys.executable
    return None


def pip_setting(name):
    """A setting of pip's as pip reads it: PIP_<NAME>, else the last of pip's config files that
    sets it (index-url, cert: a site behind a TLS-inspecting proxy names its CA there)."""
    value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if value:
        return value
    home = Path.home()
    files = [
        "/etc/pip.conf",
        "/etc/xdg/pip/pip.conf",
        home / ".pip" / "pip.conf",
        Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config", "pip", "pip.conf"),
        os.environ.get("PIP_CONFIG_FILE") or "",
    ]
    config = configparser.ConfigParser(interpolation=None)
    config.read([str(f) for f in files if f])
    for section in ("install", "global"):
        if config.has_option(section, name):
            return config.get(section, name).split()[0]
    return None


class _Links(html.parser.HTMLParser):
    """The links of a simple-API index page (PEP 503), by file name."""

    def __init__(self):
        super().__init__()
        self.links = {}
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href:
            self.links[data.strip()] = self._href
            self._href = None


def _open(url):
    # Without CA certificates (a minimal Debian has no ca-certificates) TLS cannot be checked:
    # the wheel is then trusted for its pinned sha256 alone, and the user is told so.
    context = ssl.create_default_context(cafile=pip_setting("cert"))
    if url.startswith("https:") and not context.cert_store_stats()["x509_ca"]:
        say("no CA certificates on this machine: pip's wheel is checked by its pinned sha256")
        context = ssl._create_unverified_context()
    try:
        with urllib.request.urlopen(url, timeout=60, context=context) as response:
            return response.read()
    except OSError as exc:
        raise Failed(f"cannot download {url}: {exc}") from None


def pip_wheel(folder):
    """pip's wheel, downloaded from the index into ``folder`` and checked against its hash."""
    page = (pip_setting("index-url") or PYPI).rstrip("/") + "/pip/"
    parser = _Links()
    # A local index (file:) is folders: pip reads each one's index.html, and so does this.
    parser.feed(_open(page + "index.html" if page.startswith("file:") else page).decode())
    href = parser.links.get(PIP_WHEEL)
    if href is None:
        raise Failed(f"{page} does not list {PIP_WHEEL}")
    data = _open(urllib.parse.urljoin(page, href.split("#")[0]))
    if hashlib.sha256(data).hexdigest() != PIP_SHA256:
        raise Failed(f"{PIP_WHEEL} from {page} does not have the sha256 pinned in install.py")
    wheel = Path(folder, PIP_WHEEL)
    wheel.write_bytes(data)
    return wheel


def ensure_pip(python):
    """Give ``python`` pip, where it has none."""
    if quiet([python, "-m", "pip", "--version"]):
        return
    if quiet([python, "-c", "import ensurepip"]):
        run([python, "-m", "ensurepip", "--upgrade"])
        return
    say(f"{python} has no pip and no ensurepip: pip from {PIP_WHEEL} (sha256 pinned)")
    with tempfile.TemporaryDirectory() as folder:
        wheel = pip_wheel(folder)
        # pip runs from its own wheel to install that wheel: no other pip is needed.
        run([python, f"{wheel}/pip", "install", "-q", "--no-index", str(wheel)])


def make_venv(venv):
    """A virtualenv at ``venv`` with pip in it, made by this Python (ensurepip or not)."""
    python = str(venv / "bin" / "python")
    if not Path(python).exists():
        run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    ensure_pip(python)
    return python


def main(argv):
    if sys.version_info < OLDEST:
        raise Failed(
            f"cluster-doctor needs Python {'.'.join(map(str, OLDEST))} or newer; "
            f"{sys.executable} is {sys.version.split()[0]}"
        )
    python = active_environment()
    if python is None:
        python = str(VENV / "bin" / "python")
    if not installed(python):
        if python == sys.executable:
            ensure_pip(python)
        else:
            make_venv(VENV)
        run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", str(REPO)])
    doctor = str(Path(python).parent / "doctor")
    if python != sys.executable:
        say(f"the doctor is {doctor}")
    argv = argv or ["preflight"]
    os.execv(doctor, [doctor, *argv])


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Failed as exc:
        sys.exit(f"install.py: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
