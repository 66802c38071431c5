"""A model's weights in shared memory: the learner publishes them after every update, actor
processes that act with their own copy of the policy (``actors.inference: local``) read them.

One :class:`~mtrl.actors.shm.Arena` holds every tensor of the model's ``state_dict`` as raw
bytes (any dtype, bfloat16 included) and two int64 counters: a sequence number and the weights'
version. Publishing is a seqlock write — the sequence number goes odd, the tensors are copied,
the version is stored, the sequence number goes even — so the learner never waits on a reader.
A reader copies only when the sequence is even and the version newer than its own, and keeps
the copy only when the sequence number is unchanged afterwards; a copy torn by a concurrent
write is simply repeated (a write takes well under a millisecond, an update tens of them). The
seqlock relies on stores becoming visible in program order, as on x86 (TSO); on weaker memory
models the numpy stores between interpreter steps are fenced by the interpreter itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from mtrl.actors.shm import Arena, ArenaLayout

#: A reader gives up (the writer died mid-write) after this many seconds of torn copies.
SETTLE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class WeightsLayout:
    """Where the weights live (picklable): the arena and each tensor's dtype and shape."""

    arena: ArenaLayout
    tensors: dict[str, tuple[str, tuple[int, ...]]]


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return dtype


def _views(arena: Arena, layout: WeightsLayout) -> dict[str, torch.Tensor]:
    """Torch views of the arena's bytes, one per tensor, in its dtype and shape."""
    out = {}
    for name, (dtype, shape) in layout.tensors.items():
        raw = torch.from_numpy(arena.arrays[f"w:{name}"])
        out[name] = raw.view(_dtype(dtype)).view(shape)
    return out


class SharedWeights:
    """The writer's side: created by the learner's process, which owns (unlinks) the file."""

    def __init__(self, model: torch.nn.Module) -> None:
        state = model.state_dict()
        fields: dict[str, tuple[tuple[int, ...], np.dtype]] = {"seq": ((2,), np.dtype(np.int64))}
        tensors = {}
        for name, t in state.items():
            nbytes = t.numel() * t.element_size()
            fields[f"w:{name}"] = ((nbytes,), np.dtype(np.uint8))
            tensors[name] = (str(t.dtype), tuple(t.shape))
        self.arena = Arena.create(fields, prefix="mtrl-weights-")
        self.layout = WeightsLayout(self.arena.layout, tensors)
        self._seq = self.arena.arrays["seq"]
        self._views = _views(self.arena, self.layout)
        self.publish(model, 0)

    @torch.no_grad()
    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Write ``model``'s parameters and buffers and their ``version`` (readers see either
        the old weights or the new ones, never a mix)."""
        seq = self._seq
        seq[0] += 1  # odd: a write is under way
        for name, t in model.state_dict().items():
            self._views[name].copy_(t)
        seq[1] = version
        seq[0] += 1  # even: settled

    @property
    def version(self) -> int:
        return int(self._seq[1])

    def close(self) -> None:
        self._views = {}
        self._seq = np.zeros(2, dtype=np.int64)
        self.arena.close()


class WeightsReader:
    """An actor's side: maps the weights and loads the newer ones into its own model."""

    def __init__(self, layout: WeightsLayout) -> None:
        self.arena = Arena.attach(layout.arena)
        self._seq = self.arena.arrays["seq"]
        self._views = _views(self.arena, layout)

    def newer_than(self, version: int) -> bool:
        """Whether settled weights newer than ``version`` are there (two integer reads)."""
        return int(self._seq[1]) > version

    @torch.no_grad()
    def load(self, model: torch.nn.Module, version: int) -> int:
        """Copy the published weights into ``model`` when newer than ``version``; returns the
        version ``model`` now holds. Repeats a copy torn by a concurrent write; raises
        ``RuntimeError`` if none settles within :data:`SETTLE_TIMEOUT_S` (the writer died
        mid-write)."""
        seq = self._seq
        deadline = None
        target = model.state_dict()
        while True:
            before = int(seq[0])
            if before % 2 == 0:
                published = int(seq[1])
                if published <= version:
                    return version
                for name, view in self._views.items():
                    target[name].copy_(view)
                if int(seq[0]) == before:
                    return published
            now = time.monotonic()
            deadline = deadline or now + SETTLE_TIMEOUT_S
            if now > deadline:
                raise RuntimeError(
                    f"the learner's published weights did not settle within {SETTLE_TIMEOUT_S:g}s"
                )
            time.sleep(0)

    def close(self) -> None:
        self._views = {}
        self._seq = np.zeros(2, dtype=np.int64)
        self.arena.close()
