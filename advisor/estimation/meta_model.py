"""The workload's model without memory, for the fake step: built on the meta device once, copied
for each step, then given fake storage."""

from __future__ import annotations

import copy
import functools

import torch
from torch import nn

from advisor.errors import AdvisorError, WorkloadError, error_line
from advisor.spec import WorkloadSpec
from advisor.trial.training import build_model, workload_of


def _build_on_meta(model: WorkloadSpec) -> nn.Module:
    """On the meta device (some initialisers read values back, which fake tensors cannot). A
    builder that computes its shapes from tensor values (torchvision's RegNet takes its widths
    with .tolist()) cannot build there: it is built on the CPU, then moved to meta."""
    work = workload_of(model)
    try:
        try:
            return build_model(work, torch.device("meta"))
        except NotImplementedError:  # the whole model in host memory, once
            return build_model(work, torch.device("cpu")).to("meta")
    except AdvisorError:
        raise
    except Exception as error:
        raise WorkloadError(f"{work.name}: building its model raised {error_line(error)}") from None


_built_on_meta = functools.lru_cache(maxsize=8)(_build_on_meta)


def meta_model_of(model: WorkloadSpec) -> nn.Module:
    """The workload's model on the meta device, built once: each fake step gets a copy (to_empty
    fills the module it is given), and a largest-batch search takes a dozen steps (a 0.5B
    transformers model takes seconds to build, even on meta). A model deepcopy cannot copy is
    built again."""
    try:
        return copy.deepcopy(_built_on_meta(model))
    except Exception:
        return _build_on_meta(model)


def with_fake_storage(model: nn.Module) -> nn.Module:
    """The meta model with (fake) storage, its tied parameters still tied."""
    owners: dict[int, list[tuple[nn.Module, str]]] = {}
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append((module, name))
    model = model.to_empty(device="cpu")
    for places in owners.values():
        first_module, first_name = places[0]
        shared = getattr(first_module, first_name)
        for module, name in places[1:]:
            setattr(module, name, shared)
    return model
