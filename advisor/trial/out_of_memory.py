"""A trial that runs out of memory, as data: the phase it was in and the allocation that
failed, told apart from other errors (CUDA's OOM, the CPU allocator's, the host's); and the cap
that holds a trial to a smaller GPU's memory."""

from __future__ import annotations

import re

import torch

from advisor import gpus
from advisor.errors import first_line
from advisor.result import Phase
from advisor.spec import Device, TrialSpec


class OutOfMemory(Exception):
    """The trial ran out of device memory: its phase and the allocation that failed."""

    def __init__(self, phase: Phase, requested_bytes: int | None, message: str) -> None:
        super().__init__(message)
        self.phase = phase
        self.requested_bytes = requested_bytes


def watch_cuda_oom() -> dict[str, int]:
    """Remember the size of the allocation that fails, as the allocator reports it."""
    seen: dict[str, int] = {}

    def observer(device: int, requested: int, device_allocated: int, device_free: int) -> None:
        seen["requested"] = int(requested)

    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None:
        attach(observer)
    return seen


_CUDA_REQUEST = re.compile(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_CPU_REQUEST = re.compile(r"you tried to allocate (\d+) bytes")
# what the host's allocator and loader say when the process's memory (its cap on the CPU) ran out
_HOST_OUT_OF_MEMORY = ("failed to map segment", "Cannot allocate memory")


def as_out_of_memory(
    error: Exception, phase: Phase, observed: dict[str, int] | None
) -> OutOfMemory | None:
    """The error as an OutOfMemory if it is one (CUDA's OOM, or the CPU allocator's)."""
    found = ran_out(error, observed)
    return None if found is None else OutOfMemory(phase, *found)


def ran_out(
    error: Exception, observed: dict[str, int] | None = None
) -> tuple[int | None, str] | None:
    """Where the error is running out of memory (CUDA's OOM, the CPU allocator's, the host's):
    the size of the allocation that failed (None where not said) and the message's first
    line; None for any other error."""
    message = first_line(error)
    if isinstance(error, torch.cuda.OutOfMemoryError):
        requested = (observed or {}).get("requested")
        if requested is None and (m := _CUDA_REQUEST.search(str(error))) and float(m.group(1)):
            requested = gpus.parse_bytes(m.group(1) + m.group(2))  # rounded by the message
        return requested, message
    if isinstance(error, RuntimeError) and (m := _CPU_REQUEST.search(str(error))):
        return int(m.group(1)), message
    link: BaseException | None = error
    while link is not None:  # Python's own, often wrapped (a builder's, a lazy import's)
        said = str(link)
        if isinstance(link, MemoryError) or any(s in said for s in _HOST_OUT_OF_MEMORY):
            return None, f"{type(link).__name__}: {said}".rstrip(": ")
        link = link.__cause__ or link.__context__
    return None


def apply_memory_cap(spec: TrialSpec) -> None:
    """Hold the trial to spec.memory_cap_bytes: on a GPU, the caching allocator's limit (the
    CUDA context is outside it); on the CPU, the address space the process may add."""
    cap = spec.memory_cap_bytes
    if cap is None:
        return
    if spec.device is Device.cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    else:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_address_space_bytes() + cap, hard))


def _address_space_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read VmSize from /proc/self/status")
