"""The command line: the entry point (main), the typer app and its list of commands (app), one
module per group of commands with each command's own options beside it (preflight, job, bundle,
node, explain, checks), what they share (common), flags from dataclasses (options), defaults from
a config file (config)."""
