"""cluster-doctor: finds what will break multi-node GPU training before you launch it."""

__version__ = "0.1.0"
