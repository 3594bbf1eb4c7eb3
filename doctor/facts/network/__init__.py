"""The network: interfaces, addresses and their kinds, RDMA ports, how peers resolve, and the
cross-node stages' outcomes (SSH mesh, TCP reachability)."""
