from __future__ import annotations

import pytest
from conftest import spec_of

from advisor.config import ConfigError, load, trial_spec
from advisor.spec import Checkpointing, InputKind, Precision, ConfigError


def test_defaults_are_what_a_user_expects():
    cfg = load([])
    spec = trial_spec(load(["device=cpu"]))
    assert cfg.device == "auto"
    assert spec.model.name == "resnet50" and spec.optimizer.name == "adamw"
    assert spec.precision is Precision.fp32 and spec.checkpointing is Checkpointing.none
    assert spec.grad_accum == 1 and not spec.compile and not spec.channels_last


def test_gpt2_is_built_from_config_with_its_sequence_length():
    spec = spec_of("model=gpt2", "model.seq_len=256")
    assert spec.model.input.kind is InputKind.tokens
    assert spec.model.input.shape == (256,)
    assert spec.model.input.num_classes == 50257
    assert '"_target_":"transformers.GPT2Config"' in spec.model.builder


def test_a_users_own_builder():
    spec = spec_of("model._target_=torchvision.models.resnet18", "model.name=resnet18")
    assert spec.model.name == "resnet18"
    assert '"_target_":"torchvision.models.resnet18"' in spec.model.builder


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["model=nonesuch"], "unknown model 'nonesuch'; choose one of: gpt2, resnet50"),
        (["optimizer=lion"], "unknown optimizer 'lion'; choose one of: adam, adamw"),
        (["precision=fp8"], "precision: Invalid value 'fp8', expected one of [fp32, tf32"),
        (["batch_size=many"], "batch_size: Value 'many'"),
        (["colour=blue"], "colour: Key 'colour' not in"),
        (
            ["model=gpt2", "model.config.n_layer=6"],
            "model.config.n_layer: no such argument in the config; add",
        ),
    ],
)
def test_bad_config_gets_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        load(overrides)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["device=cpu", "batch_size=0"], "batch_size must be a positive integer, got 0"),
        (["device=cpu", "model=gpt2", "channels_last=true"], "channels_last applies to image"),
        (["device=tpu"], "unknown device 'tpu'; choose cuda, cpu or auto"),
    ],
)
def test_bad_settings_get_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        trial_spec(load(overrides))
