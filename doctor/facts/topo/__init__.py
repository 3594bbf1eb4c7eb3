"""GPU and NIC topology: the matrix model, the `nvidia-smi topo -m` text format, PCI distances."""
