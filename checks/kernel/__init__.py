"""The kernel log, read once per node (doctor/facts/kernel/): what the kernel and its drivers
reported within the window (default: since boot; --since)."""

from checks.kernel.devices import nic, pcie, sxid
from checks.kernel.system import crash, hardware, lockup, nfs, oom

CHECKS = [sxid, lockup, crash, oom, nic, hardware, pcie, nfs]
