"""The command line: the entry point (main), the typer app and its commands, flags ->
dataclasses."""
