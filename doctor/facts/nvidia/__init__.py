"""NVIDIA: the driver, the GPUs (NVML, nvidia-smi), their health and the host's view of them."""
