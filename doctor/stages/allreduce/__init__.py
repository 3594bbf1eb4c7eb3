"""The tiny allreduce: a real collective across every node, with phases, deadlines and a sweep."""
