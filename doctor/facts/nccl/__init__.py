"""NCCL: the libraries a node could load, which one is picked, plugins and config; NCCL's names."""
