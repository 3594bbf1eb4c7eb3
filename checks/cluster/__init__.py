"""Cross-node checks: names resolve alike, hosts are distinct, clocks agree, slots fit GPUs, TCP
reaches every peer."""

from checks.cluster.hosts import clock_skew, doctor_version, identity_unique, slots_gpus
from checks.cluster.names import names_resolve
from checks.cluster.reach import reach_tcp

CHECKS = [names_resolve, identity_unique, clock_skew, slots_gpus, doctor_version, reach_tcp]
