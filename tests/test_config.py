from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import spec_of

from advisor.config import load, trial_spec, workload_identity
from advisor.errors import ConfigError, WorkloadError
from advisor.spec import Checkpointing, Precision


def test_defaults_are_what_a_user_expects():
    cfg = load([])
    spec = trial_spec(load(["device=cpu"]))
    assert cfg.device == "auto"
    assert spec.model.name == "resnet50" and spec.optimizer.name == "adamw"
    # torch's own precision, as a plain fp32 run has it (TF32 in cuDNN only)
    assert spec.precision is Precision.default and spec.checkpointing is Checkpointing.none
    assert spec.grad_accum == 1 and not spec.compile and not spec.channels_last


def test_gpt2_is_a_causal_lm_workload_with_its_sequence_length():
    spec = spec_of("model=gpt2", "model.seq_len=256")
    assert spec.model.source == "advisor.catalog.causal_lm"
    assert spec.model.tokens_per_sample == 256 and not spec.model.image_input
    assert '"_target_":"transformers.GPT2Config"' in spec.model.arguments
    assert spec.model.block == "GPT2Block"


def test_a_users_own_model_builder_takes_its_own_name_and_no_block():
    """Once resnet50's name and block stayed with another builder (issue 12)."""
    spec = spec_of("model.module._target_=torchvision.models.resnet18")
    assert spec.model.name == "resnet18" and spec.model.block is None
    assert '"_target_":"torchvision.models.resnet18"' in spec.model.arguments
    named = spec_of("model.module._target_=torchvision.models.resnet18", "model.block=BasicBlock")
    assert named.model.block == "BasicBlock"


def test_a_workload_file_is_found_from_any_folder_and_counted_by_name_and_code(tmp_path):
    here = spec_of("workload=examples/own_model.py:workload")
    assert here.model.name == "resnet18_smoothed" and here.model.image_input
    copy = tmp_path / "own_model.py"
    copy.write_text((Path("examples") / "own_model.py").read_text())
    there = spec_of(f"workload={copy}:workload")
    assert there.model.source != here.model.source and there.hash == here.hash


@pytest.mark.parametrize(
    "overrides",
    [["model=tiny_mlp"], ["model=gpt2", "model.seq_len=128"],
     ["workload=examples/own_model.py:workload"]],
)  # fmt: skip
def test_recommends_identity_of_a_workload_is_the_one_its_trials_are_stored_with(overrides):
    """recommend matches history by the workload's identity without building the model."""
    cfg = load(["device=cpu", *overrides])
    assert workload_identity(cfg) == trial_spec(cfg).model.identity


def test_a_config_composed_again_is_a_copy_not_the_one_handed_out_before():
    """load() composes the same overrides once a process (Hydra takes 60 ms); a caller that
    changes its config changes no other caller's."""
    first = load(["batch_size=8"])
    first.batch_size = 16
    first.model.name = "changed"
    again = load(["batch_size=8"])
    assert again.batch_size == 8 and again.model.name == "resnet50"


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["model=nonesuch"],
            "unknown model 'nonesuch'; choose one of: bert, convnext_tiny, gpt2, resnet50",
        ),
        (["optimizer=lion"], "unknown optimizer 'lion'; choose one of: adam, adamw"),
        (["precision=fp8"], "precision: Invalid value 'fp8', expected one of [default, fp32, tf32"),
        (["batch_size=many"], "batch_size=many: batch_size takes a whole number"),
        (["compile=maybe"], "compile=maybe: compile takes true or false"),
        (["colour=blue"], "colour= is not a setting; --help and README list them"),
        (["modle=gpt2"], "modle= is not a setting (did you mean model=?); --help and README"),
        (["gpu.margn=0.1"], "gpu.margn= is not a setting (did you mean margin=?)"),
        (["measure.warmup=3"], "measure.warmup= is not a setting (did you mean measure.warmup_"),
        (["lr=0.1"], "lr= is not a setting (did you mean optimizer.lr=?)"),
        (["batch_size.x=1"], "batch_size.x=1: batch_size takes a whole number"),
        (["space.batch_sizes=[a,b]"], "space.batch_sizes=[a,b]: space.batch_sizes takes a list of"),
        (["space.batch_sizes=abc"], "space.batch_sizes=abc: space.batch_sizes takes a list, such"),
        (["batch_size=null"], "batch_size=null: batch_size needs a value (null is none)"),
        (["measure=abc"], "measure=abc: measure holds settings of its own; set one (measure.NAME"),
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
    "override,told",
    [
        ("gpu.memory=lots", "gpu.memory= does not apply to run"),  # once dropped without a word
        ("gpu=a100_40gb", "leave it out, or cap its memory with memory_cap=BYTES"),
        ("trials=3", "trials= does not apply to run, which measures the one setting given"),
        ("space.precision=[bf16]", "space.precision= does not apply to run"),
    ],
)
def test_a_searchs_setting_given_to_run_is_said_not_dropped(override, told, db_url):
    import advisor
    from advisor import verbs

    with pytest.raises(ConfigError, match=re.escape(told)):
        verbs.configure(overrides=["device=cpu", override], one_trial=True)
    assert verbs.configure(overrides=["device=cpu", override]) is not None  # the others take it
    with pytest.raises(ConfigError, match="does not apply to run"):
        advisor.run("tiny_mlp", overrides=[override], device="cpu", db_url=db_url)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["device=cpu", "batch_size=0"], "batch_size must be a whole number from 1 to"),
        (["device=cpu", "model=gpt2", "channels_last=true"], "channels_last applies to image"),
        (["device=tpu"], "unknown device 'tpu'; choose cuda, cpu or auto"),
    ],
)
def test_bad_settings_get_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        trial_spec(load(overrides))


def test_a_builder_that_cannot_be_imported_is_one_line():
    with pytest.raises(WorkloadError, match="cannot import nosuch for nosuch.Net"):
        spec_of("model.module._target_=nosuch.Net")


@pytest.mark.parametrize(
    "override,message",
    [
        ("batch_size=1180591620717411303424", "batch_size must be a whole number from 1 to"),
        ("grad_accum=0", "grad_accum must be a whole number from 1 to 16777216, got 0"),
        ("space.batch_sizes=[0,-1]", "space.batch_sizes[0] must be a whole number from 1 to"),
        ("trials=-3", "trials must be at least 1, got -3"),
        ("timeout_s=0", "timeout_s must be more than 0, got 0"),
        ("minutes=-1", "minutes must be more than 0, got -1"),
        # a list inside an axis passes OmegaConf's schema (the fuzzer found [[]] crashing)
        ("space.precision=[[]]", "space.precision[0] must be one value, not []"),
        ("space.compile=[true,[false]]", "space.compile[1] must be one value, not [False]"),
    ],
)
def test_settings_out_of_range_are_refused_before_anything_runs(override, message):
    with pytest.raises(ConfigError) as error:
        load([override])
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
