"""The host beside the GPUs: disk space and answers, mounts, memory and swap, sensors, the SLURM
node state (host.py gathers them)."""
