"""Active stages: what runs on the nodes (the probe, the SSH mesh, reachability, the stacks agent,
the allreduce) and the windows and pairs they run in."""
