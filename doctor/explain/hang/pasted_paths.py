"""py-spy's text names a Python file from its package (src/python_spy.rs ``shorten_filename``:
the path below the first folder without an ``__init__.py``): ``threading.py``,
``torch/distributed/distributed_c10d.py``, ``hang/job.py``. Where a rank is
(doctor/facts/hang/position.py) tells a library's frame from the user's by its path, as the live
look (``--json``'s full ``filename``) gives it; so the files of the standard library and of
well-known packages are put back under the interpreter's folders (``Python vX.Y (EXE)`` says
which), and the user's under the script's folder where the command line names the script.
A file of a package not known here stays as py-spy printed it: the user's, as py-spy's own view.
"""

from __future__ import annotations

import sys

from doctor.facts.hang.stacks import Frame, Thread

# Packages a training job imports that are not the user's code.
PACKAGES = frozenset(
    (
        "torch", "torchvision", "torchaudio", "torchdata", "torchrec", "torchtitan",
        "fbgemm_gpu", "numpy", "scipy", "pandas", "deepspeed", "transformers", "accelerate",
        "apex", "lightning", "pytorch_lightning", "lightning_fabric", "datasets", "tokenizers",
        "safetensors", "huggingface_hub", "peft", "trl", "timm", "xformers", "flash_attn",
        "bitsandbytes", "vllm", "triton", "colossalai", "fairscale", "composer", "streaming",
        "webdataset", "nemo", "horovod", "mpi4py", "ray", "wandb", "tensorboard", "tqdm", "jax",
        "jaxlib", "flax", "tensorflow", "keras", "fsspec", "pyarrow", "PIL", "cv2", "zmq",
        "grpc", "psutil", "filelock", "requests", "urllib3", "debugpy", "_pytest", "pytest",
        "IPython", "einops", "omegaconf", "hydra", "submitit", "dill", "cloudpickle",
    )
)  # fmt: skip
STDLIB = frozenset(sys.stdlib_module_names)


def interpreter_folders(python_line: tuple[str, str] | None) -> tuple[str, str]:
    """(standard library, site-packages) of the interpreter py-spy named: ``Python v3.11.7
    (/opt/py/bin/python3.11)`` lies in /opt/py/lib/python3.11; unnamed, a generic one."""
    if python_line is None:
        return "/usr/lib/python3", "/usr/lib/python3/site-packages"
    version, exe = python_line
    root = exe.rsplit("/bin/", 1)[0] if "/bin/" in exe else "/usr"
    lib = f"{root}/lib/python{version}"
    return lib, f"{lib}/site-packages"


def script_folder(threads: tuple[Thread, ...], argv: tuple[str, ...]) -> str:
    """The folder py-spy cut from the script's path: the command line's script ends with the
    file of the outermost frame of some thread (``/work/tests/hang/job.py`` and ``hang/job.py``
    give ``/work/tests/``)."""
    scripts = [a for a in argv if a.endswith(".py") and a.startswith("/")]
    for thread in threads:
        python = thread.python()
        if python and not python[-1].file.startswith(("/", "<")):
            outer = python[-1].file
            for script in scripts:
                if script.endswith("/" + outer):
                    return script[: -len(outer)]
    return ""


def full_paths(
    threads: tuple[Thread, ...], argv: tuple[str, ...], python_line: tuple[str, str] | None
) -> tuple[Thread, ...]:
    lib, site = interpreter_folders(python_line)
    user = script_folder(threads, argv)

    def full(frame: Frame) -> Frame:
        file = frame.file
        if frame.native or file.startswith(("/", "<")) or not file:
            return frame
        top = file.split("/", 1)[0].removesuffix(".py")
        if top in STDLIB:
            file = f"{lib}/{file}"
        elif top in PACKAGES:
            file = f"{site}/{file}"
        elif user:
            file = user + file
        return Frame(frame.function, file, frame.line, frame.native)

    return tuple(Thread(t.name, t.tid, t.active, tuple(full(f) for f in t.frames)) for t in threads)
