"""Active stages: things done between nodes (SSH mesh, name resolution, reachability)."""
