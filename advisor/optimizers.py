"""The bundled optimizers (conf/optimizer/NAME.yaml, each a partial of a torch.optim class): an
optimizer as a spec (its name and its builder's arguments, as data), the one of a bundled name,
and the implementations of one algorithm (adamw: adamw, adamw_fused)."""

from __future__ import annotations

import json
from typing import Any

from omegaconf import OmegaConf

from advisor.paths import CONF_DIR
from advisor.spec import OptimizerSpec

# Keys of an optimizer node that describe it; the rest are the builder's arguments.
META_KEYS = ("name", "algorithm")


def optimizer_spec(node: dict[str, Any]) -> OptimizerSpec:
    arguments = {k: v for k, v in node.items() if k not in META_KEYS}
    return OptimizerSpec(
        name=str(node.get("name", node.get("_target_"))),
        builder=json.dumps(arguments, sort_keys=True, separators=(",", ":")),
    )


def bundled_optimizer(name: str) -> OptimizerSpec | None:
    """The optimizer of this name in conf/optimizer, or None: how a stored trial's optimizer
    is rebuilt (its stored builder is data, never instantiated)."""
    bundled = {path.stem: path for path in (CONF_DIR / "optimizer").glob("*.yaml")}
    return optimizer_spec(_node(bundled[name])) if name in bundled else None


def implementations(algorithm: str) -> list[str]:
    """The optimizer configs that implement one algorithm (adamw: adamw, adamw_fused)."""
    paths = sorted((CONF_DIR / "optimizer").glob("*.yaml"))
    return [path.stem for path in paths if _node(path).get("algorithm") == algorithm]


def _node(path: Any) -> dict[str, Any]:
    node = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(node, dict)
    return {str(k): v for k, v in node.items()}
