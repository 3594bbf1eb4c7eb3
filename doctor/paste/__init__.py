"""Pasted command output (`ip a`, `ibstat`, `ompi_info`, NCCL logs, ...) as probe captures."""

from doctor.paste.kind import Kind
from doctor.paste.reader import read_inputs, skipped
from doctor.paste.registry import KINDS, described, kinds_line

__all__ = ["KINDS", "Kind", "described", "kinds_line", "read_inputs", "skipped"]
