"""NIC selection: what NCCL, Gloo and Open MPI will use on each node, and why that breaks."""

from checks.nics.cluster import nic_cluster, two_in_subnet
from checks.nics.frameworks import gloo_iface, mpi_iface
from checks.nics.nccl import nccl_iface

CHECKS = [nccl_iface, gloo_iface, mpi_iface, two_in_subnet, nic_cluster]
