"""GPU and NIC topology: the matrix model, NVML and `nvidia-smi topo -m`/`nvlink` readers, the PCI
tree, the topology facts (topology) and the view `doctor topo` shows."""
