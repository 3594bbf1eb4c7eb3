"""torch, horovod and deepspeed facts, from real captures (torch 2.13.0+cpu, read and imported)."""

from __future__ import annotations

from capturekit import overlay, raw_capture

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.frameworks import (
    TorchFacts,
    parse_assignments,
    parse_frameworks,
    parse_metadata,
)
from doctor.facts.nccl.libraries import parse_nccl

SITE = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages"
TORCH = f"{SITE}/torch"
WHEEL_NCCL = f"{SITE}/nvidia/nccl/lib/libnccl.so.2"


def test_real_cpu_torch_read_without_import() -> None:
    fw = parse_frameworks(Capture(raw_capture("cpu-torch-wheel")))
    assert fw.torch is not None and fw.horovod is None and fw.deepspeed is None
    assert fw.torch.package.version == "2.13.0+cpu"
    assert fw.torch.package.location == TORCH
    assert fw.torch.cuda is None
    assert fw.torch.git_version == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert fw.torch.nccl_pin is None  # the CPU wheel requires no nvidia-nccl-cu*
    assert fw.torch.runtime is None  # not asked to import


def test_real_torch_import() -> None:
    torch = parse_frameworks(Capture(raw_capture("cpu-torch-import"))).torch
    assert torch is not None
    runtime = torch.runtime
    assert runtime is not None and not isinstance(runtime, Missing)
    assert (runtime.version, runtime.cuda, runtime.nccl) == ("2.13.0+cpu", None, None)
    assert runtime.backends == ("gloo",)
    assert runtime.mapped_nccl == ()
    assert runtime.import_seconds > 0.1


def test_torch_import_timeout_is_missing() -> None:
    hung = {"argv": ["python3"], "error": {"kind": "timeout", "detail": "no answer within 18.0s"}}
    cap = overlay(raw_capture("cpu-torch-wheel"), commands={"torch": hung})
    torch = parse_frameworks(cap).torch
    assert torch is not None and isinstance(torch.runtime, Missing)
    assert torch.runtime.kind == "timeout"


def test_torch_import_that_crashed() -> None:
    died = {"argv": ["python3"], "rc": 1, "stdout": "", "stderr": "ImportError: libcudnn.so.9\n"}
    cap = overlay(raw_capture("cpu-torch-wheel"), commands={"torch": died})
    torch = parse_frameworks(cap).torch
    assert torch is not None and isinstance(torch.runtime, Missing)
    assert "libcudnn.so.9" in torch.runtime.reason


def test_metadata_headers_only() -> None:
    text = (
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.7.1+cu128\n"
        "Requires-Dist: nvidia-nccl-cu12==2.26.2; platform_system == 'Linux'\n"
        'Requires-Dist: pytest; extra == "test"\n'
        "\nRequires-Dist: in-the-description==1\n"
    )
    assert parse_metadata(text) == (
        "2.7.1+cu128",
        ("nvidia-nccl-cu12==2.26.2; platform_system == 'Linux'",),
    )


def test_assignments_skip_computed_values() -> None:
    text = "from x import y\n__version__ = '1.2'\ncuda: Optional[str] = None\nz = y()\n"
    assert parse_assignments(text) == {"__version__": "1.2", "cuda": None}


def test_a_damaged_version_file_keeps_its_good_lines() -> None:
    # Found by the property tests: junk inside torch's version.py made the file unparseable and
    # the whole frameworks and NCCL areas "could not parse".
    text = "__version__ = '2.7.1'\ncuda: Optional[str] = '12.8'\n\x7f)](\nnccl = (2, 26\n"
    assert parse_assignments(text) == {"__version__": "2.7.1", "cuda": "12.8"}
    assert parse_assignments("x = '1'\0\n") == {}  # a NUL byte: nothing to trust
    assert parse_assignments("v = " + "(" * 200 + ")" * 200 + "\n") == {"v": ()}


def _cuda_torch(**extra_dirs: list[str]) -> Capture:
    """The real capture with torch's version.py and metadata turned into a CUDA 12.8 build.

    Written, not captured (no CUDA torch here): version.py keeps the real file's layout with
    ``cuda = '12.8'``; the METADATA pin is the form torch's CUDA wheels use.
    """
    raw = raw_capture("cpu-torch-wheel")
    version_py = raw["files"][f"{TORCH}/version.py"]["text"].replace(
        "cuda: Optional[str] = None", "cuda: Optional[str] = '12.8'"
    )
    meta_path = raw["values"]["dist:torch"]["value"]
    meta = "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0+cu128\n"
    meta += "Requires-Dist: nvidia-nccl-cu12==2.27.7; platform_system == 'Linux'\n\n"
    dirs = {path: {"entries": entries} for path, entries in extra_dirs.items()}
    return overlay(
        raw,
        files={f"{TORCH}/version.py": {"text": version_py}, meta_path: {"text": meta}},
        dirs=dirs,
    )


def test_cuda_torch_build_and_its_pinned_nccl() -> None:
    torch = parse_frameworks(_cuda_torch()).torch
    assert isinstance(torch, TorchFacts)
    assert (torch.cuda, torch.nccl_pin, torch.package.version) == ("12.8", "2.27.7", "2.13.0+cu128")


def test_cuda_torch_preloads_the_wheel_nccl() -> None:
    assert parse_nccl(_cuda_torch()).torch_pick == WHEEL_NCCL


def test_torch_lib_copy_wins_over_the_wheel() -> None:
    own = {f"{TORCH}/lib": ["libc10.so", "libnccl.so.2", "libtorch.so"]}
    assert parse_nccl(_cuda_torch(**own)).torch_pick == f"{TORCH}/lib/libnccl.so.2"


def test_horovod_extensions_from_listings() -> None:
    """Written listing (no horovod here): which framework extensions a horovod build has."""
    hvd = f"{SITE}/horovod"
    cap = overlay(
        raw_capture("cpu-torch-wheel"),
        values={"module:horovod": {"value": hvd}},
        files={f"{hvd}/__init__.py": {"text": "__version__ = '0.28.1'\n"}},
        dirs={
            f"{hvd}/torch": {
                "entries": ["__init__.py", "mpi_lib_v2.cpython-311-x86_64-linux-gnu.so"]
            },
            f"{hvd}/tensorflow": {"entries": ["__init__.py"]},
            f"{hvd}/mxnet": {"error": {"kind": "absent", "detail": "No such file or directory"}},
        },
    )
    horovod = parse_frameworks(cap).horovod
    assert horovod is not None
    assert (horovod.package.version, horovod.extensions) == ("0.28.1", ("torch",))


def test_real_deepspeed_install() -> None:
    """deepspeed 0.19.8 installed from PyPI (no ops built) into a folder on PYTHONPATH."""
    ds = parse_frameworks(Capture(raw_capture("cpu-deepspeed"))).deepspeed
    assert ds is not None
    assert (ds.package.version, ds.package.location) == ("0.19.8", "/tmp/ds/deepspeed")
    assert ("nccl_version", "0.0") in ds.torch_info and ("version", "2.13") in ds.torch_info
    assert "torch>=2.0.0" in ds.package.requires
    assert not any("extra ==" in r for r in ds.package.requires)
