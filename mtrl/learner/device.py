"""Devices: config names → ``torch.device``, and the few things that differ between kinds.

Everything else in mtrl is written against plain torch tensors on ``learner.device``; the
handful of places where a device kind needs something extra go through :class:`Accelerator`,
so no other module branches on ``device.type``:

=========  ==================================================================================
kind       what differs
=========  ==================================================================================
cpu        nothing; collectives use gloo
cuda       host→device copies go through pinned memory and are non-blocking; nccl
mps        nothing beyond the device itself; gloo (collectives run on CPU tensors)
xla        torch_xla (TPU, or its CPU PJRT device for tests); ops are traced lazily, so the
           graph is cut and run with ``torch_xla.sync()`` after every optimiser step
=========  ==================================================================================

torch_xla is imported lazily and only for ``xla`` devices: it is an optional extra
(``pip install 'mtrl[tpu]'``) bound to the torch minor it was built for.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any

import torch

from mtrl.errors import UserError

__all__ = [
    "Accelerator",
    "DeviceError",
    "auto_kind",
    "import_torch_xla",
    "resolve_device",
    "to_device",
    "xla_unavailable_reason",
]

DEVICE_NAMES = "auto, cpu, cuda[:N], mps or xla[:N]"


class DeviceError(UserError):
    """A device the config names is not usable here (no GPU, torch_xla missing or mismatched)."""


def _installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def import_torch_xla() -> Any:
    """Import torch_xla, or raise :class:`DeviceError` saying why not and which torch it needs.

    torch_xla X.Y is compiled against torch X.Y.* (its wheel metadata does not say so); beside
    another torch its import fails with an undefined C++ symbol.
    """
    torch_version = torch.__version__
    xla_version = _installed_version("torch_xla") or _installed_version("torch-xla")
    if xla_version is None:
        raise DeviceError(
            f"device 'xla' needs torch_xla, which is not installed (torch {torch_version} is). "
            "torch_xla X.Y works only beside torch X.Y.x, so install the pair together, e.g. "
            "`pip install torch==2.9.1 torch_xla==2.9.0` (mtrl's 'tpu' extra) in its own venv; "
            "scripts/xla_tests.sh builds one, docs/DISTRIBUTED.md has the TPU VM recipe"
        )
    try:
        return importlib.import_module("torch_xla")
    except (ImportError, OSError) as e:
        raise DeviceError(
            f"device 'xla': torch_xla {xla_version} does not load beside torch {torch_version} "
            f"({e}). torch_xla {_minor(xla_version)} needs torch {_minor(xla_version)}.x: "
            f"install matching versions in their own venv, e.g. `pip install "
            f"torch=={_minor(xla_version)}.* torch_xla=={xla_version}` (scripts/xla_tests.sh "
            "builds one)"
        ) from e


def xla_unavailable_reason() -> str | None:
    """None if the ``xla`` device can be used here, else why not (for skips and messages)."""
    try:
        import_torch_xla()
    except DeviceError as e:
        return str(e)
    return None


def _xla_device(index: int | None) -> torch.device:
    xla = import_torch_xla()
    make = getattr(xla, "device", None)  # torch_xla >= 2.5; xm.xla_device before
    if make is None:
        make = importlib.import_module("torch_xla.core.xla_model").xla_device
    return torch.device(make(index) if index is not None else make())


def auto_kind(gpus: int, local_replicas: int = 1) -> str:
    """What ``auto`` means on a node with ``gpus`` visible GPUs and ``local_replicas`` learner
    replicas: ``cuda`` when each replica gets a GPU of its own (NCCL refuses two ranks on one
    GPU), else ``cpu``."""
    return "cuda" if gpus > 0 and local_replicas <= gpus else "cpu"


def resolve_device(name: str, local_rank: int = 0, local_replicas: int = 1) -> torch.device:
    """The device a config name means in this process.

    ``auto`` is ``cuda`` when a GPU per replica of this node (``local_replicas``, torchrun's
    ``LOCAL_WORLD_SIZE``) is visible, else ``cpu``. ``cuda`` without an index is the GPU of this
    process's ``local_rank`` (one learner replica per GPU under torchrun); ``xla`` without an
    index is the XLA device torch_xla assigns to this process.
    """
    kind, _, index_str = name.partition(":")
    if index_str and not index_str.isdigit():
        raise DeviceError(f"device {name!r}: the index must be a number; use {DEVICE_NAMES}")
    index = int(index_str) if index_str else None
    if kind == "auto" and index is None:
        kind = auto_kind(_cuda_count(), local_replicas)
    if kind == "cpu" and index is None:
        return torch.device("cpu")
    if kind == "cuda":
        count = _cuda_count()
        if count == 0:
            raise DeviceError(
                f"device {name!r}: torch {torch.__version__} sees no CUDA GPU (a CPU build, or "
                "no GPU visible); use device: cpu or install a CUDA build of torch"
            )
        if index is None and local_replicas > count:
            raise DeviceError(
                f"device {name!r}: {local_replicas} learner replicas on this node but "
                f"{count} CUDA GPU(s); NCCL needs a GPU per replica: start at most {count} "
                f"(--nproc {count}) or use device: cpu (gloo)"
            )
        i = index if index is not None else local_rank % count
        if i >= count:
            raise DeviceError(f"device {name!r}: only {count} CUDA device(s) are visible")
        return torch.device("cuda", i)
    if kind == "mps" and index is None:
        if not torch.backends.mps.is_available():
            raise DeviceError("device 'mps': Apple's Metal backend is not available here")
        return torch.device("mps")
    if kind == "xla":
        return _xla_device(index)
    raise DeviceError(f"unknown device {name!r}; use {DEVICE_NAMES}")


def _cuda_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def to_device(x: Any, device: torch.device | str | None) -> torch.Tensor:
    """A host array or tensor as a tensor on ``device`` (``None``: where it is, sharing memory).

    To CUDA the copy goes through pinned memory and does not block the host: a copy from
    pageable memory waits until the GPU has finished everything queued before it, which in a
    learner's step is one stall per tensor moved (SAC moves several per gradient step). The
    pinned copy is taken at once, so the caller may reuse ``x`` as soon as this returns.
    """
    t = torch.as_tensor(x)
    if device is None:
        return t
    device = torch.device(device)
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


@dataclass(frozen=True)
class Accelerator:
    """What one device kind needs beyond ``tensor.to(device)``; built from a ``torch.device``."""

    device: torch.device

    @property
    def kind(self) -> str:
        return self.device.type

    @property
    def dist_backend(self) -> str:
        """torch.distributed backend for replicas on this kind: nccl on CUDA, xla, else gloo."""
        return {"cuda": "nccl", "xla": "xla"}.get(self.kind, "gloo")

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        """Host tensor → this device; on CUDA through pinned memory, without blocking the host."""
        return to_device(x, self.device)

    def after_step(self) -> None:
        """Call after an optimiser step: on XLA, cut the traced graph and run it."""
        if self.kind == "xla":
            _xla_sync()

    def synchronize(self) -> None:
        """Wait until queued device work is done (for timings)."""
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.kind == "xla":
            _xla_sync()
            importlib.import_module("torch_xla.core.xla_model").wait_device_ops()
        elif self.kind == "mps":
            torch.mps.synchronize()


def _xla_sync() -> None:
    xla = import_torch_xla()
    sync = getattr(xla, "sync", None)  # torch_xla >= 2.6; xm.mark_step before
    if sync is None:
        sync = importlib.import_module("torch_xla.core.xla_model").mark_step
    sync()
