"""The answer in the user's trainer's words (emit=): each configuration is built by the real
library and trains 2 steps of a tiny model on the CPU, from the text advisor prints.

What the CPU cannot run is constructed or validated instead: a CUDA spec's TrainingArguments in
fp16 (bf16 and tf32 are refused by transformers without a GPU of their kind: validated with
use_cpu=True added), Lightning's Trainer for CUDA (built with accelerator="cpu" in its place),
accelerate's config file of a CUDA fp16 compiled spec (loaded by accelerate's own loader), and
the torch lines of a CUDA spec (executed: without CUDA, torch turns autocast and the scaler
off). The `gpu` test trains every CUDA configuration for real."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import spec_of
from dense_blocks import Dense, gradients
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.nn import functional as F

from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.emit.trainers import Trainer, trainer_config
from advisor.errors import ConfigError
from advisor.spec import Device, Precision, TrialSpec
from advisor.trial.training import build_model, workload_of

ACCELERATE = shutil.which("accelerate", path=str(Path(sys.executable).parent))
STEPS = 2


def model_of(spec: TrialSpec, device: str = "cpu") -> nn.Module:
    return build_model(workload_of(spec.model), torch.device(device))


def token_dataset(spec: TrialSpec) -> list[dict[str, torch.Tensor]]:
    """Samples for STEPS optimizer steps of tiny_gpt2, exactly."""
    tokens = torch.randint(512, (STEPS * spec.effective_batch_size, 32))
    return [{"input_ids": t, "labels": t} for t in tokens]


def image_dataset(spec: TrialSpec) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Samples for STEPS optimizer steps of tiny_cnn, exactly."""
    n = STEPS * spec.effective_batch_size
    return list(zip(torch.randn(n, 3, 32, 32), torch.randint(10, (n,)), strict=True))


class ImageLoss(nn.Module):
    """tiny_cnn as transformers' Trainer wants a model: the batch's keys in, its loss out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        return {"loss": F.cross_entropy(self.model(pixel_values), labels)}


def run_text(emitted: TrainerConfig, **names: Any) -> dict[str, Any]:
    """The printed configuration, executed as the user's script would run it."""
    namespace = dict(names)
    exec(compile(emitted.text, f"<emit={emitted.trainer}>", "exec"), namespace)
    return namespace


def snapshot(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def all_moved(before: list[torch.Tensor], model: nn.Module) -> bool:
    """Every parameter changed: the optimizer stepped on all of them."""
    after = [p.detach().cpu() for p in model.parameters()]
    return all(not torch.equal(b.cpu(), a) for b, a in zip(before, after, strict=True))


# --- transformers ---------------------------------------------------------------------------


def test_hf_arguments_train_a_transformers_model(tmp_path, monkeypatch):
    """bf16, the fused AdamW, checkpointing by the model's own switch, named as the installed
    TrainingArguments names it (activation_checkpointing in transformers 5, gradient_ before)."""
    from transformers import TrainingArguments

    monkeypatch.chdir(tmp_path)  # (the Trainer's output_dir)
    spec = spec_of("model=tiny_gpt2", "precision=bf16", "batch_size=2", "grad_accum=2",
                   "checkpointing=blocks", "optimizer=adamw_fused")  # fmt: skip
    emitted = trainer_config(spec, "hf")
    taken = inspect.signature(TrainingArguments).parameters
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in taken
        else ("gradient_checkpointing")
    )
    assert emitted.arguments[checkpointing] is True
    assert set(emitted.arguments) <= set(taken)
    assert emitted.arguments["optim"] == "adamw_torch_fused"
    assert "import torch" not in emitted.text.splitlines()  # (no line of it uses torch)
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(emitted, model=model, train_dataset=token_dataset(spec))
    args = ran["args"]
    assert isinstance(args, TrainingArguments)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 2)
    assert args.bf16 and args.use_cpu and args.learning_rate == 0.001
    assert args.logging_nan_inf_filter  # (its default: on the CPU there is no GPU to wait for)
    args.max_steps = STEPS
    trainer = ran["trainer"]
    trainer.train()
    assert trainer.state.global_step == STEPS
    assert model.is_activation_checkpointing if hasattr(model, "is_activation_checkpointing") \
        else model.is_gradient_checkpointing  # fmt: skip
    optimizer = (
        trainer.optimizer.optimizer
        if hasattr(trainer.optimizer, "optimizer")
        else (trainer.optimizer)
    )
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["fused"]
    assert all_moved(before, model)


def test_hf_lines_say_what_its_arguments_cannot(tmp_path, monkeypatch):
    """A model outside transformers: its blocks are wrapped by the lines, NHWC by a line, and
    AdamW's foreach (not the Trainer's default on the CPU) goes to Trainer as the optimizer."""
    monkeypatch.chdir(tmp_path)
    spec = spec_of("model=tiny_cnn", "precision=fp32", "batch_size=2", "grad_accum=2",
                   "checkpointing=blocks", "channels_last=true", "optimizer=adamw")  # fmt: skip
    emitted = trainer_config(spec, "hf")
    assert "activation_checkpointing" not in emitted.arguments and "optim" not in emitted.arguments
    assert emitted.arguments["tf32"] is False  # strict fp32, in TrainingArguments' words
    assert any("apply_activation_checkpointing(" in line for line in emitted.lines)
    model = ImageLoss(model_of(spec))
    dataset = [{"pixel_values": x, "labels": y} for x, y in image_dataset(spec)]
    ran = run_text(emitted, model=model, train_dataset=dataset)
    ran["args"].max_steps = STEPS
    trainer = ran["trainer"]
    trainer.train()
    assert trainer.state.global_step == STEPS
    wrapped = ran["model"]
    assert sum(isinstance(m, CheckpointWrapper) for m in wrapped.modules()) == 2
    assert wrapped.model.stem.weight.is_contiguous(memory_format=torch.channels_last)
    assert trainer.optimizer.optimizer is ran["optimizer"] or trainer.optimizer is ran["optimizer"]
    assert ran["optimizer"].defaults["foreach"] is True


def test_hf_sgd_with_momentum_is_its_optim_and_optim_args(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = spec_of("model=tiny_gpt2", "optimizer=sgd_momentum", "batch_size=2")
    emitted = trainer_config(spec, "hf")
    assert emitted.arguments["optim"] == "sgd" and emitted.arguments["optim_args"] == "momentum=0.9"
    ran = run_text(emitted, model=model_of(spec), train_dataset=token_dataset(spec))
    optimizer = ran["trainer"].create_optimizer()
    assert isinstance(optimizer, torch.optim.SGD)
    assert optimizer.defaults["momentum"] == 0.9 and optimizer.defaults["lr"] == 0.01


def test_hf_arguments_of_a_cuda_spec_are_constructed(tmp_path, monkeypatch):
    """fp16 with compile builds as is; bf16, which transformers refuses without a GPU, builds
    with use_cpu=True added; tf32, refused without an Ampere GPU (transformers' own check, seen
    here), builds without it."""
    from transformers import TrainingArguments

    monkeypatch.chdir(tmp_path)
    for precision in ("fp16", "bf16", "tf32"):
        spec = on_cuda(spec_of("model=tiny_gpt2", f"precision={precision}", "compile=true"))
        emitted = trainer_config(spec, "hf")
        assert emitted.arguments[precision] is True and emitted.arguments["torch_compile"]
        assert "use_cpu" not in emitted.arguments
        assert "torch.backends.cudnn.benchmark = True" in emitted.lines
        arguments = emitted.arguments | ({} if precision == "fp16" else {"use_cpu": True})
        if precision == "tf32":
            with pytest.raises(ValueError, match="tf32 requires Ampere"):
                TrainingArguments(**arguments)
            del arguments["tf32"]
        args = TrainingArguments(**arguments)
        assert args.torch_compile and args.per_device_train_batch_size == spec.batch_size
        # on CUDA the nan check of each micro batch's loss, a wait for the GPU, is off, and said
        assert args.logging_nan_inf_filter is False
        said = emitted.text.split("args = TrainingArguments(")[0]
        assert "# logging_nan_inf_filter=False: on (its default), the Trainer asks" in said
    bf16 = on_cuda(spec_of("model=tiny_gpt2", "precision=bf16", "compile=true"))
    # a compiled bf16 model: TrainingArguments turns TF32 on, the lines after it turn it back
    restore = trainer_config(bf16, "hf").text.split("args = TrainingArguments(")[1]
    assert 'torch.set_float32_matmul_precision("highest")' in restore


# --- Lightning ------------------------------------------------------------------------------


def lightning_module(model: nn.Module, configure_optimizers: Any) -> Any:
    import lightning

    class Classifier(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch: Any, index: int) -> torch.Tensor:
            x, y = batch
            return F.cross_entropy(self.model(x), y)

    Classifier.configure_optimizers = configure_optimizers  # type: ignore[method-assign]
    return Classifier()


QUIET = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
         "enable_model_summary": False}  # fmt: skip


def test_lightning_trainer_trains_with_the_lines_it_needs(tmp_path, monkeypatch):
    import lightning

    monkeypatch.chdir(tmp_path)
    spec = spec_of("model=tiny_cnn", "precision=bf16", "batch_size=2", "grad_accum=2",
                   "checkpointing=blocks", "channels_last=true",
                   "optimizer=sgd_momentum")  # fmt: skip
    emitted = trainer_config(spec, "lightning")
    assert emitted.arguments == {
        "accelerator": "cpu", "precision": "bf16-mixed", "accumulate_grad_batches": 2,
    }  # fmt: skip
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(emitted, model=model, train_dataset=image_dataset(spec))
    assert isinstance(ran["trainer"], lightning.Trainer)  # the printed one, as printed
    module = lightning_module(ran["model"], ran["configure_optimizers"])
    trainer = lightning.Trainer(**emitted.arguments, max_steps=STEPS, **QUIET)
    trainer.fit(module, ran["train_loader"])
    assert trainer.global_step == STEPS
    assert isinstance(trainer.optimizers[0], torch.optim.SGD)
    assert trainer.optimizers[0].defaults["momentum"] == 0.9
    assert ran["train_loader"].batch_size == 2
    assert all_moved(before, model)


def test_lightning_arguments_of_a_cuda_spec_are_constructed():
    """The CUDA accelerator cannot start here: the rest is built with the CPU's in its place."""
    import lightning

    for precision, named in (("bf16", "bf16-mixed"), ("fp16", "16-mixed"), ("tf32", "32-true")):
        spec = on_cuda(spec_of("model=tiny_cnn", f"precision={precision}"))
        emitted = trainer_config(spec, "lightning")
        assert emitted.arguments["precision"] == named and emitted.arguments["benchmark"] is True
        assert emitted.arguments["accelerator"] == "cuda"
        lightning.Trainer(**(emitted.arguments | {"accelerator": "cpu"}), **QUIET)
    assert 'torch.set_float32_matmul_precision("high")' in emitted.lines


# TF32 as libraries leave it before the emitted lines run: torch 2.9's API or the older one
TF32_BEFORE = (
    "",
    "torch.backends.fp32_precision = 'tf32'",  # transformers' TrainingArguments (tf32, compile)
    "torch.backends.fp32_precision = 'ieee'",
    "torch.backends.cuda.matmul.fp32_precision = 'tf32'",
    "torch.backends.cudnn.conv.fp32_precision = 'ieee'",
    "torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = False",
)
TF32_READ = """
import json, torch
for before, lines in json.loads(input()):
    exec(before)
    exec(lines)
    said = []
    for getter in ("torch.get_float32_matmul_precision()", "torch.backends.cuda.matmul.allow_tf32",
                   "torch.backends.cudnn.allow_tf32"):
        try:
            said.append(eval(getter))
        except RuntimeError as error:  # a mix of the two APIs
            said.append(str(error)[:60])
    print(json.dumps(said))
"""


def test_the_tf32_lines_leave_torch_readable_by_a_trainer():
    """torch 2.9's two APIs for TF32, left mixed, make torch.get_float32_matmul_precision()
    (Lightning's Trainer calls it on CUDA: the H200's failure of the cuda tests below) or
    torch.backends.cudnn.allow_tf32 raise. After each state a library may leave, the emitted
    lines leave every getter answering, with TF32 as the trial had it (in a process of its
    own: the settings are the process's)."""
    wanted = {"tf32": ["high", True, True], "fp32": ["highest", False, False],
              "default": ["highest", False, True]}  # fmt: skip
    cases = []
    for precision in wanted:
        said = lines.tf32_lines(Precision(precision))
        cases += [(before, "\n".join(said)) for before in TF32_BEFORE]
    read = subprocess.run(
        [sys.executable, "-c", TF32_READ], input=json.dumps(cases), capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    got = [json.loads(line) for line in read.stdout.splitlines()]
    assert got == [wanted[p] for p in wanted for _ in TF32_BEFORE]


# --- accelerate -----------------------------------------------------------------------------


def launched(emitted: TrainerConfig, spec: TrialSpec, folder: Path) -> dict[str, Any]:
    """accelerate launch of the printed file, running tiny_gpt2 with the script lines it carries
    as comments: what the launched process saw."""
    assert ACCELERATE, "accelerate's console script is not installed"
    config = folder / "accelerate.yaml"
    config.write_text(emitted.text)
    script = folder / "train.py"
    script.write_text("\n".join([
        "import json, os, torch",
        "from advisor.spec import TrialSpec",
        "from advisor.trial.training import build_model, workload_of",
        f"spec = TrialSpec.from_json({spec.to_json()!r})",
        "model = build_model(workload_of(spec.model), torch.device('cpu'))",
        f"tokens = torch.randint(512, ({STEPS * spec.effective_batch_size}, 32))",
        "train_dataset = [{'input_ids': t, 'labels': t} for t in tokens]",
        "def compute_loss(model, batch):",
        "    return model(**batch).loss",
        *emitted.lines,
        "steps = []",
        "optimizer.optimizer.register_step_post_hook(lambda *_: steps.append(1))",
        "for batch in train_loader:",
        "    train_step(batch)",
        "print(json.dumps({'steps': len(steps), 'precision': accelerator.mixed_precision,",
        "                  'accumulation': accelerator.gradient_accumulation_steps,",
        "                  'device': accelerator.device.type,",
        "                  'compiled': hasattr(model, '_orig_mod'),",
        "                  'allocator': os.environ.get('PYTORCH_CUDA_ALLOC_CONF')}))",
    ]))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    done = subprocess.run(
        [ACCELERATE, "launch", "--config_file", str(config), str(script)],
        capture_output=True, text=True, env=env, cwd=folder, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_accelerate_config_is_read_by_accelerate_launch(tmp_path):
    """The launched process trains 2 steps in bf16 on the CPU, accumulating 2 micro batches,
    with the allocator's variable the lines set."""
    spec = spec_of("model=tiny_gpt2", "precision=bf16", "batch_size=2", "grad_accum=2",
                   "checkpointing=blocks", "expandable_segments=true")  # fmt: skip
    said = launched(trainer_config(spec, "accelerate"), spec, tmp_path)
    assert said == {"steps": STEPS, "precision": "bf16", "accumulation": 2, "device": "cpu",
                    "compiled": False, "allocator": "expandable_segments:True"}  # fmt: skip


def test_accelerate_config_of_a_cuda_spec_is_loaded_by_accelerate(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    spec = on_cuda(spec_of("model=tiny_gpt2", "precision=fp16", "compile=true"))
    emitted = trainer_config(spec, "accelerate")
    path = tmp_path / "accelerate.yaml"
    path.write_text(emitted.text)
    loaded = load_config_from_file(str(path))
    assert loaded.mixed_precision == "fp16" and loaded.use_cpu is False
    assert loaded.dynamo_config == {"dynamo_backend": "INDUCTOR"}
    assert loaded.num_processes == 1


# --- plain PyTorch --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        ("precision=bf16", "checkpointing=blocks", "channels_last=true", "optimizer=sgd_momentum"),
        ("precision=fp16", "optimizer=adamw_fused", "expandable_segments=true"),
    ],
    ids=["bf16-checkpointed-nhwc", "fp16-scaled"],
)
def test_torch_lines_train_two_steps(overrides, monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "")  # (recorded, so the lines' setting is undone)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    spec = spec_of("model=tiny_cnn", "batch_size=2", "grad_accum=2", *overrides)
    emitted = trainer_config(spec, "torch")
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(emitted, model=model, compute_loss=lambda m, b: F.cross_entropy(m(b[0]), b[1]))
    data = image_dataset(spec)
    batches = [(torch.stack([x for x, _ in pair]), torch.stack([y for _, y in pair]))
               for pair in zip(data[::2], data[1::2], strict=True)]  # fmt: skip
    for step in range(STEPS):
        ran["train_step"](batches[step * 2 : step * 2 + 2])
    assert all_moved(before, model)
    assert (ran["BATCH_SIZE"], ran["GRAD_ACCUM"]) == (2, 2)
    if spec.precision.value == "fp16":
        assert ran["scaler"].is_enabled() and ran["optimizer"].defaults["fused"]
        assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_torch_lines_checkpoint_a_block_given_a_list_its_caller_appends_to():
    """DenseNet's layers are given the list of the features so far, which their caller goes on
    appending to: the emitted lines recompute each as it was called, as the trial does."""
    spec = spec_of("model=tiny_cnn", "batch_size=4", "checkpointing=blocks", "optimizer=sgd")
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, block="Layer"))
    torch.manual_seed(0)
    plain, model, x = Dense(), Dense(), torch.randn(4, 8)
    model.load_state_dict(plain.state_dict())
    ran = run_text(trainer_config(spec, "torch"), model=model, compute_loss=lambda m, b: m(b))
    assert sum(isinstance(m, CheckpointWrapper) for m in model.modules()) == 3
    for g, e in zip(gradients(model, x), gradients(plain, x), strict=True):
        torch.testing.assert_close(g, e)
    model.zero_grad()
    before = snapshot(model)
    ran["train_step"]([x])
    assert all_moved(before, model)


@pytest.mark.slow
def test_torch_lines_of_a_compiled_spec_train(monkeypatch):
    spec = spec_of("model=tiny_mlp", "batch_size=4", "compile=true", "optimizer=adamw")
    emitted = trainer_config(spec, "torch")
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(emitted, model=model, compute_loss=lambda m, b: F.cross_entropy(m(b[0]), b[1]))
    assert isinstance(ran["model"], torch._dynamo.eval_frame.OptimizedModule)
    for _ in range(STEPS):
        ran["train_step"]([(torch.randn(4, 64), torch.randint(10, (4,)))])
    assert all_moved(before, model)


def test_torch_lines_of_a_cuda_spec_run():
    """Executed here without CUDA (torch turns autocast and the scaler off and says so)."""
    spec = on_cuda(spec_of("model=tiny_mlp", "precision=fp16", "batch_size=4"))
    emitted = trainer_config(spec, "torch")
    assert 'torch.autocast("cuda", dtype=torch.float16)' in emitted.text
    assert 'scaler = torch.amp.GradScaler("cuda")' in emitted.lines
    with pytest.warns(UserWarning):
        ran = run_text(emitted, model=model_of(spec),
                       compute_loss=lambda m, b: F.cross_entropy(m(b[0]), b[1]))  # fmt: skip
        ran["train_step"]([(torch.randn(4, 64), torch.randint(10, (4,)))])


# --- the choices, the command ---------------------------------------------------------------


def on_cuda(spec: TrialSpec) -> TrialSpec:
    return dataclasses.replace(spec, device=Device.cuda)


def test_an_unknown_trainer_is_one_line_naming_the_choices():
    spec = spec_of("model=tiny_mlp")
    with pytest.raises(ConfigError, match=r"^unknown emit 'keras'; choose one of: hf, lightning, "
                       r"accelerate, torch$"):  # fmt: skip
        trainer_config(spec, "keras")
    assert {t.value for t in Trainer} == {"hf", "lightning", "accelerate", "torch"}


# --- on a GPU: each CUDA configuration trains ----------------------------------------------


def matmul_tf32() -> bool:
    return torch.get_float32_matmul_precision() != "highest"


@pytest.mark.gpu
def test_hf_cuda_configuration_trains(tmp_path, monkeypatch):
    """bf16, compiled, checkpointed by the model's own switch; TF32 as measured afterwards."""
    monkeypatch.chdir(tmp_path)
    spec = on_cuda(
        spec_of(
            "model=tiny_gpt2",
            "precision=bf16",
            "batch_size=2",
            "grad_accum=2",
            "checkpointing=blocks",
            "optimizer=adamw_fused",
            "compile=true",
        )
    )
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(trainer_config(spec, "hf"), model=model, train_dataset=token_dataset(spec))
    assert not matmul_tf32()  # TrainingArguments turned it on; the lines after it, off
    ran["args"].max_steps = STEPS
    ran["trainer"].train()
    assert ran["trainer"].state.global_step == STEPS
    assert next(model.parameters()).is_cuda and all_moved(before, model)


@pytest.mark.gpu
def test_lightning_cuda_configuration_trains(tmp_path, monkeypatch):
    import lightning

    monkeypatch.chdir(tmp_path)
    spec = on_cuda(spec_of("model=tiny_cnn", "precision=fp16", "batch_size=2", "grad_accum=2",
                           "checkpointing=blocks", "channels_last=true", "compile=true",
                           "optimizer=sgd_momentum"))  # fmt: skip
    emitted = trainer_config(spec, "lightning")
    model = model_of(spec)
    before = snapshot(model)
    ran = run_text(emitted, model=model, train_dataset=image_dataset(spec))
    trainer = lightning.Trainer(**emitted.arguments, max_steps=STEPS, **QUIET)
    trainer.fit(lightning_module(ran["model"], ran["configure_optimizers"]), ran["train_loader"])
    assert trainer.global_step == STEPS and trainer.precision == "16-mixed"
    assert torch.backends.cudnn.benchmark and all_moved(before, model)


@pytest.mark.gpu
def test_accelerate_cuda_configuration_trains(tmp_path):
    spec = on_cuda(spec_of("model=tiny_gpt2", "precision=fp16", "batch_size=2", "grad_accum=2",
                           "compile=true"))  # fmt: skip
    said = launched(trainer_config(spec, "accelerate"), spec, tmp_path)
    assert said == {"steps": STEPS, "precision": "fp16", "accumulation": 2, "device": "cuda",
                    "compiled": True, "allocator": None}  # fmt: skip


@pytest.mark.gpu
def test_torch_cuda_configuration_trains():
    spec = on_cuda(
        spec_of(
            "model=tiny_cnn",
            "precision=tf32",
            "batch_size=2",
            "grad_accum=2",
            "channels_last=true",
            "compile=true",
            "optimizer=adamw_fused",
        )
    )
    model = model_of(spec, "cuda")
    before = snapshot(model)
    ran = run_text(trainer_config(spec, "torch"), model=model,
                   compute_loss=lambda m, b: F.cross_entropy(m(b[0]), b[1]))  # fmt: skip
    assert matmul_tf32()
    for _ in range(STEPS):
        ran["train_step"]([(torch.randn(2, 3, 32, 32, device="cuda"),
                            torch.randint(10, (2,), device="cuda"))] * 2)  # fmt: skip
    assert all_moved(before, model)


# --- a job on several GPUs ------------------------------------------------------------------

RANKS_HARNESS = """
import json, os, sys
import torch
import torch.distributed as dist
from torch.nn import functional as F
from advisor.models import TinyMLP

torch.manual_seed(0)  # (each rank builds the same model, as a user's script does)
namespace = {"model": TinyMLP(in_features=64, hidden=256, depth=3, num_classes=10),
             "compute_loss": lambda m, b: F.cross_entropy(m(b[0]), b[1])}
exec(compile(open(sys.argv[1]).read(), "<emit=torch>", "exec"), namespace)
model, rank = namespace["model"], dist.get_rank()
local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
before = [p.detach().clone() for p in local]
torch.manual_seed(1 + rank)  # each rank its own samples
for _ in range(2):
    n, accum = namespace["BATCH_SIZE"], namespace["GRAD_ACCUM"]
    namespace["train_step"]([(torch.randn(n, 64), torch.randint(10, (n,))) for _ in range(accum)])
moved = all(not torch.equal(b, p.detach()) for b, p in zip(before, local))
whole = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
said = {"moved": moved, "local": sum(p.numel() for p in local),
        "whole": sum(p.numel() for p in whole),
        "sum": float(sum(p.detach().double().sum() for p in whole))}
every = [None] * dist.get_world_size()
dist.all_gather_object(every, said)
if rank == 0:
    with open(sys.argv[2], "w") as out:
        json.dump(every, out)
dist.barrier()
# gloo on torch 2.14 aborted one rank now and then as it was torn down, after this barrier
# ("terminate called without an active exception", 1 run in 6 under load): nothing of the
# lines', so both leave without tearing it down
os._exit(0)
"""


@pytest.mark.parametrize(
    "strategy, knobs",
    [("ddp", ("gpus=2",)), ("fsdp", ("gpus=2",)),
     ("fsdp", ("gpus=2", "fsdp.param_dtype=bf16", "fsdp.reduce_dtype=fp32",
               "fsdp.reshard_after_forward=false")),
     ("hsdp", ("gpus=4", "nodes=2"))],
    ids=["ddp", "fsdp", "fsdp-knobs", "hsdp"],
)  # fmt: skip
def test_torch_lines_of_a_job_train_under_torchrun(strategy, knobs, tmp_path):
    """The lines run as the user runs them, under torchrun (gloo on the CPU), a process a
    rank: each rank trains its own samples, and afterwards all hold the same model (DDP
    averaged the gradients, its first micro batch under no_sync; FSDP2 holds half of it a
    rank; HSDP, 2 x 2, half a rank too, its shards all-reduced across the pairs)."""
    spec = spec_of("model=tiny_mlp", "batch_size=4", "grad_accum=2", f"strategy={strategy}",
                   *knobs)  # fmt: skip
    emitted = trainer_config(spec, "torch")
    launch = "--nnodes=2 --nproc_per_node=2" if strategy == "hsdp" else "--nproc_per_node=2"
    assert f"torchrun {launch}" in emitted.text
    if "fsdp.param_dtype=bf16" in knobs:  # FSDP2's knobs, as the trial sharded it
        assert "fully_shard(block, reshard_after_forward=False, mp_policy=policy)" in emitted.text
        assert "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)" in (
            emitted.text
        )
    (tmp_path / "emitted.py").write_text(emitted.text)
    (tmp_path / "harness.py").write_text(RANKS_HARNESS)
    out = tmp_path / "ranks.json"
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc_per_node={spec.gpus}", str(tmp_path / "harness.py"),
         str(tmp_path / "emitted.py"), str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    ranks = json.loads(out.read_text())
    assert len(ranks) == spec.gpus and all(r["moved"] for r in ranks)
    assert len({r["sum"] for r in ranks}) == 1  # the same model on every rank, though fed apart
    whole = sum(math.prod(s) for s in shapes_of_tiny_mlp())
    assert {r["whole"] for r in ranks} == {whole}
    # DDP: each rank the whole model; FSDP2 and HSDP: half each (the head's 10 rows: 2 x 5)
    assert ranks[0]["local"] == (whole if strategy == "ddp" else whole // 2)


def shapes_of_tiny_mlp() -> list[tuple[int, ...]]:
    from advisor.models import TinyMLP

    model = TinyMLP(in_features=64, hidden=256, depth=3, num_classes=10)
    return [tuple(p.shape) for p in model.parameters()]


def test_the_header_counts_micro_batches_in_words():
    """'1 micro batch a step', '4 micro batches a step': the header is read by people."""
    one = lines.header(spec_of("model=tiny_mlp", "batch_size=8"), "lib", [])
    four = lines.header(spec_of("model=tiny_mlp", "batch_size=8", "grad_accum=4"), "lib", [])
    assert "8 samples a micro batch, 1 micro batch a step (8 samples)" in one[1]
    assert "8 samples a micro batch, 4 micro batches a step (32 samples)" in four[1]


def test_emit_hf_says_it_needs_accelerate_where_it_is_missing(monkeypatch):
    """transformers' Trainer raises ImportError without accelerate (a walk ran the emitted
    file after installing `all`, which lacks it): said before anything runs, as for Lightning."""
    from advisor import extras
    from advisor.emit.trainers import Trainer, require

    installed = extras.installed
    monkeypatch.setattr(extras, "installed", lambda name: name != "accelerate" and installed(name))
    with pytest.raises(ConfigError, match=r"^emit=hf needs accelerate, which is not installed"):
        require(Trainer.hf)
    require(Trainer.torch)  # (torch's lines need nothing more)
