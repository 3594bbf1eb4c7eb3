"""`doctor run -- COMMAND`: the preflight as the gate of the real job, its fix applied, its
failure explained (docs/launch.md)."""
