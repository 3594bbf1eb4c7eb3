"""Built-in check plugins. Each module ends with ``CHECKS = [...]`` and is registered in
pyproject.toml under the ``cluster_doctor.checks`` entry-point group, like any plugin."""
