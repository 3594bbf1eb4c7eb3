"""A bench on the test beds judges the kernel log from its own start only.

Every namespace node of both beds shares this machine's one kernel log, and that log keeps until
reboot the lines the test suite writes to /dev/kmsg (an SXid, an MCE, a soft lockup): a bench
run after the suite would find them on every healthy node. The tests narrow each doctor they
start the same way (tests/conftest.py ``kernel_log_window``); a ``CLUSTER_DOCTOR_SINCE`` already
set is kept.
"""

from __future__ import annotations

import os
import time

from doctor.pipeline.request import SINCE_ENV


def from_now() -> None:
    """Every doctor this process starts from here on reads the kernel log from this moment."""
    os.environ.setdefault(SINCE_ENV, f"@{time.time():.6f}")
