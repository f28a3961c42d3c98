"""The workload contract: what a user trains, as advisor measures it.

A Workload says how to build the model, make one batch and compute the loss. The bundled models
are workloads (advisor/catalog.py) and so are the user's: a function returning a Workload, named
as `path/to/file.py:function` or `package.module:function`. Each trial calls that function again
in its own process, so the function is the unit advisor can name, store and rebuild; a changed
source file is a new experiment (see code_hash).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._pytree import tree_leaves

from advisor.errors import AdvisorError, WorkloadError, error_line
from advisor.spec import WorkloadIdentity, WorkloadSpec

# Libraries whose version is part of a trial's identity: they build the models.
MODEL_LIBRARIES = ("torch", "torchvision", "transformers", "timm")
LOSS_CHECK_S = 10.0  # the meta-device check of the loss, at most (gpt2's takes about 2 s)


@dataclasses.dataclass(frozen=True)
class Workload:
    """What a trial trains.

    model: builds the nn.Module; called under the trial's device (torch.device context).
    batch: batch(batch_size, device) returns one batch: a tensor, tuple or dict (any pytree).
    loss: loss(model, batch) returns the scalar loss. Default: model(**batch).loss for a dict
      batch (transformers' own loss), cross entropy of model(x) against y for an (x, y) tuple.
    block: the module class (or its name) that activation checkpointing wraps.
    family: workloads whose memory behaves alike (default: the name).
    """

    name: str
    model: Callable[[], nn.Module]
    batch: Callable[[int, torch.device], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor] | None = None
    block: type[nn.Module] | str | None = None
    family: str | None = None

    @property
    def block_name(self) -> str | None:
        return (
            self.block if isinstance(self.block, str) or self.block is None else self.block.__name__
        )

    def compute_loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """The loss of one batch, checked to be a scalar tensor (the message gives the shape
        of what came back, for the batch it was given)."""
        loss = self.loss(model, batch) if self.loss is not None else default_loss(model, batch)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            got = (
                f"shape {list(loss.shape)}"
                if isinstance(loss, torch.Tensor)
                else type(loss).__name__
            )
            raise WorkloadError(
                f"{self.name}: the loss must be a scalar tensor, got {got} for a batch of "
                f"{_batch_size(batch)}; reduce it (e.g. .mean())"
            )
        return loss


def _batch_size(batch: Any) -> int | str:
    first = next((t for t in tree_leaves(batch) if isinstance(t, torch.Tensor)), None)
    return int(first.shape[0]) if first is not None and first.dim() else "?"


def default_loss(model: nn.Module, batch: Any) -> torch.Tensor:
    """transformers' own loss for a dict batch; cross entropy for an (x, y) tuple, the classes
    on the last dimension of the output (logits [B, C], or [B, T, C] against labels [B, T])."""
    if isinstance(batch, Mapping):
        output = model(**batch)
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, Mapping):
            loss = output.get("loss")
        if loss is None:
            raise WorkloadError(
                "model(**batch) returned no loss; put the labels in the batch or give loss=..."
            )
        return loss
    if isinstance(batch, tuple | list) and len(batch) == 2:
        inputs, labels = batch
        output = model(inputs)
        logits = getattr(output, "logits", output)
        if not isinstance(logits, torch.Tensor):
            raise WorkloadError(f"model(x) returned {type(output).__name__}; give loss=...")
        return F.cross_entropy(logits.flatten(0, -2), labels.flatten())
    raise WorkloadError(
        f"no default loss for a batch of type {type(batch).__name__}: return a dict or an "
        "(x, y) tuple from batch(), or give loss=..."
    )


def load(source: str, arguments: Mapping[str, Any] | None = None) -> Workload:
    """Call the function named by source with the arguments (data, from the config) and check
    that it returns a Workload."""
    function = resolve(source)
    try:
        workload = function(**(arguments or {}))
    except AdvisorError:  # said in one line already (a missing extra, say)
        raise
    except Exception as error:
        raise WorkloadError(f"{source} raised {error_line(error)}") from None
    if not isinstance(workload, Workload):
        raise WorkloadError(
            f"{source} returned {type(workload).__name__}; it must return an advisor.Workload"
        )
    block = workload.block
    if not (block is None or isinstance(block, str | type)):
        raise WorkloadError(
            f"{source}: block={block!r}; give the class of the module to checkpoint, or its name"
        )
    return workload


def describe(source: str, arguments: str) -> WorkloadSpec:
    """Load the workload, make a batch of one sample on the CPU, check its loss and block on
    the meta device, and say what it is. Asked again after its file changed, it loads the new
    code."""
    resolve(source)  # a missing file or function is said before anything is read
    return _describe(source, arguments, code_hash(source, arguments))


def identity(source: str, arguments: str) -> WorkloadIdentity:
    """describe(...).identity without building the model or making a batch (3 s of
    `advisor recommend` for resnet50): the workload's function is called for its name."""
    code = code_hash(source, arguments)
    return WorkloadIdentity.of(load(source, json.loads(arguments)).name, source, arguments, code)


@functools.lru_cache(maxsize=64)
def _describe(source: str, arguments: str, code: str) -> WorkloadSpec:
    workload = load(source, json.loads(arguments))
    batch = make_batch(workload, 1, torch.device("cpu"))
    tensors = [t for t in tree_leaves(batch) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise WorkloadError(f"{workload.name}: batch(1, cpu) returned no tensors")
    _check_on_meta(workload)
    image = any(t.dim() == 4 and t.is_floating_point() for t in tensors)
    ids = batch.get("input_ids") if isinstance(batch, Mapping) else None
    if not isinstance(ids, torch.Tensor):
        ids = next((t for t in tensors if t.dim() == 2 and not t.is_floating_point()), None)
    return WorkloadSpec(
        name=workload.name,
        source=source,
        arguments=arguments,
        code=code,
        versions=library_versions(_libraries_used(source, json.loads(arguments))),
        block=workload.block_name,
        family=workload.family or workload.name,
        image_input=image,
        tokens_per_sample=int(ids.shape[-1]) if ids is not None else None,
    )


def _check_on_meta(workload: Workload) -> None:
    """Build the model on the meta device (nothing allocated) and check that its block exists
    and that the loss of two samples is a scalar, before any trial runs. Code the meta device
    cannot run (a value read back, say) is left to the first trial; so is a loss that takes
    longer than LOSS_CHECK_S (it waits on something): the worker has a timeout, this process
    has not."""
    meta = torch.device("meta")
    try:
        with torch.device(meta):
            model = workload.model()
    except Exception:
        return
    if not isinstance(model, torch.nn.Module):  # (a builder's node without its _target_)
        raise WorkloadError(
            f"{workload.name}: model() returned {type(model).__name__}, not a torch.nn.Module"
        )
    block = workload.block_name
    if block and not any(type(m).__name__ == block for m in model.modules()):
        raise WorkloadError(
            f"{workload.name}: the model has no module of class {block!r} to checkpoint; "
            "name one of its classes in block="
        )
    if threading.current_thread() is not threading.main_thread():
        return  # the alarm below needs the main thread

    def expire(*_: object) -> None:
        raise _TookTooLong

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, LOSS_CHECK_S)
    try:
        workload.compute_loss(model, workload.batch(2, meta))
    except WorkloadError:
        raise
    except (Exception, _TookTooLong):
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _TookTooLong(BaseException):
    """The loss check ran out of time (a BaseException: the user's code may catch Exception)."""


def make_batch(workload: Workload, batch_size: int, device: torch.device) -> Any:
    """workload.batch, with what it raises (other than running out of memory) as the
    workload's fault."""
    try:
        return workload.batch(batch_size, device)
    except torch.OutOfMemoryError:
        raise
    except Exception as error:
        if "tried to allocate" in str(error):  # the CPU allocator's out of memory
            raise
        raise WorkloadError(
            f"{workload.name}: batch({batch_size}, {device}) raised {error_line(error)}"
        ) from None


def resolve(source: str) -> Callable[..., Any]:
    """The function a source names: path/to/file.py:function, package.module:function, or
    package.module.function (Hydra's _target_)."""
    module_name, sep, attribute = source.rpartition(":")
    if not sep:
        module_name, _, attribute = source.rpartition(".")
    if not module_name or not attribute:
        raise WorkloadError(
            f"cannot read workload {source!r}; give path/to/file.py:function or "
            "package.module:function"
        )
    module = _module_from_file(module_name) if module_name.endswith(".py") else None
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except (ImportError, ValueError, TypeError) as error:  # (the last two: a name like .x)
            raise WorkloadError(
                f"cannot import {module_name} for {source}: {error_line(error)}"
            ) from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise WorkloadError(f"{module_name} has no function {attribute!r}; check the workload name")
    return function


def _module_from_file(path_text: str) -> Any:
    """Import a workload file as a module named after it, its folder importable (so it can
    import its neighbours, in this process and in the worker)."""
    path = Path(path_text).resolve()
    if not path.is_file():
        raise WorkloadError(
            f"workload file {path_text} does not exist; give path/to/file.py:function"
        )
    # named by its path and content: an edited file is loaded anew, not taken from sys.modules
    content = hashlib.sha256(str(path).encode() + path.read_bytes()).hexdigest()[:12]
    name = f"advisor_workload_{path.stem}_{content}"
    if name in sys.modules:
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise WorkloadError(f"importing {path_text} raised {error_line(error)}") from None
    return module


def code_hash(source: str, arguments: str) -> str:
    """sha256 (16 hex) of the source files behind a workload: the file or module of its
    function, and of every _target_ its arguments name outside the model libraries (whose
    versions are recorded instead)."""
    digest = hashlib.sha256()
    for path in sorted(_source_files(source, json.loads(arguments))):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _source_files(source: str, arguments: Any) -> set[Path]:
    files = set()
    for target in [source, *targets_in(arguments)]:
        module_name = target.rpartition(":")[0] or target.rpartition(".")[0]
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            if not path.is_file():
                raise WorkloadError(f"{target}: there is no file {path}")
            files.add(path)
        elif module_name.split(".")[0] not in MODEL_LIBRARIES:
            try:
                module = sys.modules.get(module_name) or importlib.import_module(module_name)
            except (ImportError, ValueError, TypeError) as error:
                raise WorkloadError(
                    f"cannot import {module_name} for {target}: {error_line(error)}"
                ) from None
            if file := getattr(module, "__file__", None):  # (a built-in module has none)
                files.add(Path(file))
    return files


def targets_in(node: Any) -> list[str]:
    """Every _target_ inside a config node (a dict of a builder's arguments)."""
    if isinstance(node, dict):
        found = [node["_target_"]] if isinstance(node.get("_target_"), str) else []
        return found + [t for value in node.values() for t in targets_in(value)]
    if isinstance(node, list):
        return [t for value in node for t in targets_in(value)]
    return []


def library_versions(names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The installed versions of torch and of the model libraries named."""
    versions = []
    for name in MODEL_LIBRARIES:
        if name == "torch" or name in names:
            try:
                versions.append((name, importlib.metadata.version(name)))
            except importlib.metadata.PackageNotFoundError:
                continue
    return tuple(versions)


_IMPORT = re.compile(r"^\s*(?:from|import)\s+(\w+)", re.MULTILINE)


def _libraries_used(source: str, arguments: Any) -> list[str]:
    """The model libraries a workload uses: those its arguments' _target_s name, and those its
    code imports (the whole file of a user's workload; the function alone of advisor's
    catalog, which imports each library for one kind of model)."""
    used = [t.split(".")[0] for t in targets_in(arguments)]
    function = resolve(source)
    if getattr(function, "__module__", "").startswith("advisor."):
        text = inspect.getsource(function)
    else:
        text = "".join(path.read_text() for path in _source_files(source, {}))
    used += _IMPORT.findall(text)
    return [name for name in MODEL_LIBRARIES if name in used]
