"""GPU profiles (conf/gpu/*.yaml) and the local GPU as NVML sees it.

NVML answers without creating a CUDA context, so the process that launches trials can ask which
GPU it has and still never initialise CUDA itself. NVML numbers every GPU of the host and ignores
CUDA_VISIBLE_DEVICES; every function here takes the CUDA index (what torch calls cuda:0) and
finds NVML's GPU through that variable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import platform
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from advisor.paths import CONF_DIR

# What a trial's process holds on a GPU beyond the allocator: the CUDA context, cuBLAS/cuDNN
# handles and loaded kernels (742-764 MiB on the H200's 54 trials, experiments/2026-11-30-
# h200-memory); the estimate adds it, and a trial capped to a smaller target leaves room for it.
DEFAULT_CONTEXT_BYTES = 762 * 2**20
# What NCCL holds on a GPU outside the allocator, which a rank on the fake process group never
# shows: measured once, in a one-GPU NCCL group on the H200, over the fake group's process under
# DDP (490 MiB under FSDP2, whose fake-group process holds 70 MiB more; experiments/2026-12-05-
# h200-ranks). Likely more with peers.
NCCL_OWN_BYTES = 560 * 2**20


@dataclasses.dataclass(frozen=True)
class GpuProfile:
    name: str  # the config name: h200, a100_40gb, ...
    match: str  # regular expression matched against the NVML device name
    memory_bytes: int  # total device memory as the driver reports it
    peak_flops: dict[str, float]  # dense peak FLOP/s by precision (fp32, tf32, bf16, fp16)
    # a job on several GPUs (communication.py), in GB/s: memory bandwidth, and bus bandwidth
    # as nccl-tests reports it, within a node and between nodes; None: none published
    memory_bandwidth: float | None = None
    intra_node_busbw: float | None = None
    inter_node_busbw: float | None = None
    gpus_per_node: int | None = None


@dataclasses.dataclass(frozen=True)
class LocalGpu:
    name: str
    memory_bytes: int
    driver: str


_JOB_KEYS = ("memory_bandwidth", "intra_node_busbw", "inter_node_busbw", "gpus_per_node")


def load_profiles(conf_dir: Path = CONF_DIR) -> dict[str, GpuProfile]:
    """The profiles by name. Read once a process (conf/ is package data, read-only): a job's
    rank is priced by its GPU's profile each time the search sees it, and parsing the YAML
    took 13 ms a time."""
    return dict(_profiles(conf_dir))


@functools.lru_cache(maxsize=4)
def _profiles(conf_dir: Path) -> dict[str, GpuProfile]:
    profiles = {}
    for path in sorted((conf_dir / "gpu").glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        assert isinstance(node, dict)
        if node.get("match") is None:  # 'auto' names no GPU of its own
            continue
        profiles[node["name"]] = GpuProfile(
            name=node["name"],
            match=node["match"],
            memory_bytes=int(node["memory"]),
            peak_flops={k: float(v) for k, v in node["peak_flops"].items()},
            **{key: node.get(key) for key in _JOB_KEYS},
        )
    return profiles


def profile_for_device_name(device_name: str) -> GpuProfile | None:
    """The profile whose pattern matches a device name such as 'NVIDIA H200', if any."""
    for profile in load_profiles().values():
        if re.search(profile.match, device_name):
            return profile
    return None


def local_gpu(index: int = 0) -> LocalGpu | None:
    """CUDA's GPU `index` through NVML, or None where there is no driver or no such GPU."""
    with _nvml() as nvml:
        handle = _handle(nvml, index)
        if handle is None:
            return None
        return LocalGpu(
            name=_text(nvml.nvmlDeviceGetName(handle)),
            memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            driver=_text(nvml.nvmlSystemGetDriverVersion()),
        )


def visible_gpus() -> list[str]:
    """The GPUs CUDA would show, each as its CUDA_VISIBLE_DEVICES entry (a worker given one sees
    just that GPU, as cuda:0): the variable's entries, or every GPU NVML counts."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [str(nvml_device(i, visible)) for i in range(len(visible.split(",")))]
        return [e for e in entries if e != "None"]
    with _nvml() as nvml:
        return [] if nvml is None else [str(i) for i in range(nvml.nvmlDeviceGetCount())]


def cpu_name() -> str:
    """The CPU as a device name: 'CPU: ' and its model."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return "CPU: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU: " + (platform.processor() or platform.machine())


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value: int | float | str) -> int:
    """24GiB, 40 GB, 1.5e9 or 123 as bytes (a positive, finite size); ValueError for anything
    else."""
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?(?:e\d+)?|\.\d+)\s*([a-zA-Z]*)\s*", value)
        if match and match.group(2).lower() in _UNITS:
            number = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if number is None or not (math.isfinite(number) and 1 <= number <= 2**60):
        raise ValueError(f"{value!r} is not a size; write it like 24GiB, 40GB or 25769803776")
    return int(number)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def process_used_bytes(pid: int, index: int = 0) -> int | None:
    """GPU memory NVML charges to one process (its CUDA context included), if it can say."""
    with _nvml() as nvml:
        handle = _handle(nvml, index)
        if handle is None:
            return None
        for process in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if process.pid == pid and process.usedGpuMemory is not None:
                return int(process.usedGpuMemory)
    return None


def device_used_bytes(index: int = 0) -> int | None:
    """GPU memory in use on the whole device, by every process, as NVML sees it."""
    with _nvml() as nvml:
        handle = _handle(nvml, index)
        return None if handle is None else int(nvml.nvmlDeviceGetMemoryInfo(handle).used)


def nvml_device(cuda_index: int, visible: str | None) -> int | str | None:
    """NVML's index (int) or UUID (str) of CUDA's GPU `cuda_index` under CUDA_VISIBLE_DEVICES =
    `visible`; None where that GPU is hidden or is a MIG slice. CUDA reads the list up to its
    first invalid entry. Numbers in it are taken for NVML's, which holds where CUDA enumerates
    in PCI bus order: always for identical GPUs, and with CUDA_DEVICE_ORDER=PCI_BUS_ID."""
    if visible is None:
        return cuda_index
    entries = []
    for entry in (e.strip() for e in visible.split(",")):
        if not (entry.isdigit() or entry.startswith("GPU-")):
            break
        entries.append(entry)
    if cuda_index >= len(entries):
        return None
    entry = entries[cuda_index]
    return int(entry) if entry.isdigit() else entry


def _handle(nvml: Any, cuda_index: int) -> Any:
    """NVML's handle for CUDA's GPU `cuda_index`, or None."""
    if nvml is None:
        return None
    device = nvml_device(cuda_index, os.environ.get("CUDA_VISIBLE_DEVICES"))
    try:
        if isinstance(device, int):
            return nvml.nvmlDeviceGetHandleByIndex(device)
        if isinstance(device, str):
            return nvml.nvmlDeviceGetHandleByUUID(device)
    except nvml.NVMLError:  # no such GPU
        return None
    return None


@contextlib.contextmanager
def _nvml() -> Iterator[Any]:
    """The NVML module, initialised, or None where there is no NVML or no GPU."""
    try:
        import pynvml  # provided by nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def size_text(n: float) -> str:
    """A size in the unit that shows it: GiB, MiB, KiB, or bytes (a tiny model's parameters
    were "0.0 MiB", and a sweep skipped a spec "estimated at 0.0 GiB" for a 12 MiB budget)."""
    if abs(n) >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    if abs(n) >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if abs(n) >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return f"{n:.0f} B"


def format_bytes(n: int) -> str:
    """A size as a budget is written: 24GiB, 1.5GiB, 512MiB (a budget's name, in its sweep's
    key: as it was, so that its sweep resumes; Target.label is what is shown)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"
