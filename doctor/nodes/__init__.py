"""Which nodes, and how to reach them: what the user named (targets, inventory) and the transport
that runs a command on each (connect, transport/: this machine, SSH, srun, --exec)."""
