"""The node's links and their firmware beyond "up": RDMA ports' rate, width, counters and flaps
(rdma.py), the NICs' and GPUs' PCIe links (pcie.py), HCA and GPU firmware and the RDMA driver,
alike on each node and across nodes (firmware.py)."""

from checks.links.firmware import drift, mixed_hca_firmware
from checks.links.pcie import links
from checks.links.rdma import counters, link, port_count

CHECKS = [link, port_count, counters, links, mixed_hca_firmware, drift]
