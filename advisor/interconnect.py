"""The link a job's collectives run over (issue 28): bus bandwidth as nccl-tests reports it,
within a node (NVLink or PCIe) and between nodes (the network), from the target GPU's profile
(conf/gpu/NAME.yaml: a published figure, or none) or the user's own nccl-tests number
(gpu.intra_node_busbw=, gpu.inter_node_busbw=, in GB/s); and nodes= that can hold gpus=."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.errors import ConfigError
from advisor.gpus import load_profiles, profile_for_device_name

GB = 1e9  # the profiles' bandwidths are in GB/s


@dataclasses.dataclass(frozen=True)
class Interconnect:
    """The bus bandwidths a job's collectives run at, and where the figures come from."""

    within: float | None  # bytes/s within a node; None where none is published nor given
    between: float | None  # bytes/s between nodes; None on one node, or none known
    nodes: int
    says: str  # 'within a node at 460 GB/s (h200's gpu.intra_node_busbw)'

    @property
    def slowest(self) -> float:
        """What a ring over every GPU of the job is held to: the network across nodes."""
        found = self.between if self.nodes > 1 else self.within
        assert found is not None  # (interconnect() refuses a link without it)
        return found


def interconnect(
    gpu: Mapping[str, Any], gpus: int, nodes: int, device_name: str | None = None
) -> Interconnect:
    """The link of a job of `gpus` over `nodes`, from the composed gpu node (its profile's
    figures and the user's gpu.KEY= overrides; gpu=auto: the profile of `device_name`, the GPU
    the rank ran on). ConfigError, in one line saying how to give one, where the figure the
    job needs is missing (within a node; between nodes, with nodes=2 or more)."""
    node = resolved(gpu, device_name)
    check_nodes(node, gpus, nodes)
    named = node.get("name") not in (None, "auto")
    key = "intra_node_busbw" if nodes == 1 else "inter_node_busbw"
    if node.get(key) is None:
        where = "within a node" if nodes == 1 else "between nodes"
        said = (
            f"{node['name']} has no published bus bandwidth {where}"
            if named
            else "no GPU is named whose interconnect to model"
        )
        raise ConfigError(
            f"{said}: give gpu.{key}=GB_PER_S (nccl-tests' all_reduce_perf busbw at large "
            "sizes)" + ("" if named else " or gpu=NAME")
        )
    within, between = (_gb_per_s(node.get(k), k) for k in ("intra_node_busbw", "inter_node_busbw"))
    figure = within if nodes == 1 else between
    where = "within a node" if nodes == 1 else f"between {nodes} nodes"
    source = f"{node['name']}'s gpu.{key}" if named else f"gpu.{key} as given"
    return Interconnect(
        within=within,
        between=between if nodes > 1 else None,
        nodes=nodes,
        says=f"{where} at {(figure or 0) / GB:g} GB/s ({source})",
    )


def check_nodes(gpu: Mapping[str, Any], gpus: int, nodes: int) -> None:
    """nodes= that can hold gpus=, and the gpu node's bandwidths where given (as GB/s):
    ConfigError in one line for any other."""
    check_figures(gpu)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
    if nodes > 1 and gpus == 1:
        raise ConfigError("nodes= spreads a job's GPUs over machines: give gpus=N too")
    if gpus % nodes:
        raise ConfigError(f"gpus={gpus} over nodes={nodes} is uneven: give a multiple of {nodes}")
    per_node = gpu.get("gpus_per_node")
    if per_node is not None and gpus // nodes > int(per_node):
        raise ConfigError(
            f"gpus={gpus} over nodes={nodes} is {gpus // nodes} a node, and a "
            f"{gpu.get('name')} node holds {per_node}: give nodes={-(-gpus // int(per_node))}"
        )


def check_figures(gpu: Mapping[str, Any]) -> None:
    """The gpu node's bandwidths, where given, as GB/s: ConfigError in one line for another."""
    for key in ("intra_node_busbw", "inter_node_busbw", "memory_bandwidth"):
        _gb_per_s(gpu.get(key), key)


def resolved(gpu: Mapping[str, Any], device_name: str | None) -> dict[str, Any]:
    """The gpu node with its profile's figures (gpu=auto: the profile of `device_name`, the GPU
    the rank runs on, where it has one) under the user's gpu.KEY= overrides."""
    node = dict(gpu)
    name = node.get("name")
    if name in (None, "auto"):
        profile = None if device_name is None else profile_for_device_name(device_name)
    else:
        profile = load_profiles().get(str(name))
    if profile is not None:
        given = {k: v for k, v in node.items() if v is not None and k != "name"}
        node = {**dataclasses.asdict(profile), **given}
    return node


def of_arguments(arguments: Sequence[str]) -> tuple[dict[str, Any], int]:
    """The gpu node and nodes= a sweep was begun with, from its stored KEY=VALUE arguments."""
    given = dict(a.partition("=")[::2] for a in arguments)
    node: dict[str, Any] = {k.removeprefix("gpu."): v for k, v in given.items()
                            if k.startswith("gpu.")}  # fmt: skip
    node["name"] = given.get("gpu")
    nodes = given.get("nodes", "1")
    return node, int(nodes) if nodes.isdigit() else 1


def memory_bandwidth(device_name: str | None) -> float | None:
    """The memory bandwidth (bytes/s) of the GPU a rank ran on, where its profile has one."""
    profile = None if device_name is None else profile_for_device_name(device_name)
    figure = None if profile is None else profile.memory_bandwidth
    return None if figure is None else float(figure) * GB


def _gb_per_s(figure: Any, key: str) -> float | None:
    """A bus bandwidth given in GB/s, as bytes/s; None for none."""
    if figure is None:
        return None
    try:
        value = float(figure)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value < 1e5:
        raise ConfigError(f"gpu.{key}={figure!r}: give GB/s as a positive number, e.g. 460")
    return value * GB
