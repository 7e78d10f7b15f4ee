"""NCCL settings derived from a node's compute NICs and the fabric it sits on.

Every variable is documented at
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (anchor per variable below).
Only what the blueprint determines is set; everything else keeps NCCL's own defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
IB_TRANSPORTS = frozenset({"infiniband", "ib", "roce"})
RAIL_DESIGNS = frozenset({"rail-optimized", "rail-only"})


def conventional_hca_names(nic_count: int) -> list[str]:
    """``mlx5_0`` .. ``mlx5_<n-1>``: how ConnectX NICs are named on most GPU servers."""
    return [f"mlx5_{k}" for k in range(nic_count)]


def nccl_env(
    nic_count: int,
    transport: str,
    nic_names: Sequence[str] | None = None,
    socket_ifname: str | None = None,
    *,
    design: str | None = None,
) -> dict[str, str]:
    """The NCCL environment for a job on nodes with ``nic_count`` compute NICs.

    ``transport`` is the blueprint's ``infiniband`` or ``roce`` (anything else means TCP
    sockets); ``design`` is the blueprint's fabric design. With no compute NICs only the
    bootstrap interface applies, if one is given.
    """
    if nic_count < 0:
        raise ValueError(f"nic_count {nic_count} < 0")
    names = list(nic_names) if nic_names is not None else conventional_hca_names(nic_count)
    if len(names) != nic_count:
        raise ValueError(f"{len(names)} NIC names for {nic_count} NICs")
    env: dict[str, str] = {}
    if socket_ifname:
        # #nccl-socket-ifname: the IP interface for bootstrap and the socket transport; the
        # front-end NIC, so that NCCL does not pick docker0 or lo.
        env["NCCL_SOCKET_IFNAME"] = socket_ifname
    if nic_count == 0:
        return env
    kind = transport.lower()
    if kind in IB_TRANSPORTS:
        # #nccl-ib-hca: a leading "=" matches these HCA names exactly, not as prefixes.
        env["NCCL_IB_HCA"] = "=" + ",".join(names)
        if kind == "roce":
            # #nccl-ib-gid-index: the GID for RoCE v2 (routable, over UDP/IP); index 3 on the
            # usual mlx5 GID table (0/1: RoCE v1/v2 link-local, 2/3: v1/v2 on the IPv4 address).
            env["NCCL_IB_GID_INDEX"] = "3"
    else:
        # #nccl-ib-disable: no RDMA fabric; use the socket transport.
        env["NCCL_IB_DISABLE"] = "1"
    if design is not None and design.lower() in RAIL_DESIGNS:
        # #nccl-cross-nic: 0 keeps each ring/tree channel on one NIC (rail), as rail-optimized
        # and rail-only fabrics assume; crossing rails would go through the spine or not at all.
        env["NCCL_CROSS_NIC"] = "0"
    return env
