"""Built-in check plugins. Each module named in ``PLUGINS`` ends with ``CHECKS = [...]``.

The registry (doctor/judge/registry.py) loads these from this package, so a doctor run from a
checkout, a shared filesystem or a node without pip judges with every built-in check; only
third-party plugins come through the ``cluster_doctor.checks`` entry-point group. (Found through
installed metadata, the built-ins were none at all where the checkout was not installed: a
preflight with 0 checks and 0 fail.)"""

# The name is the plugin's: ``--select``-free commands that judge one area load it alone.
PLUGINS = (
    "allreduce",
    "amd",
    "cluster",
    "gpu",
    "gpu_bench",
    "gpu_count",
    "gpu_health",
    "gpu_vitals",
    "hang",
    "host",
    "kernel",
    "links",
    "mesh",
    "nccl",
    "nccl_log",
    "nics",
    "rdma",
    "system",
    "topo",
    "versions",
)
