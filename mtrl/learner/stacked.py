"""Several tasks' networks of one shape run as one batched matmul per layer.

A multi-task learner that draws a mixed batch every step passes each task's rows through that
task's own encoder and head: with ten tasks, ten small ``addmm`` calls per layer where one would
do. On a GPU each call costs its launch whatever its size; on a CPU core, its dispatch. Two
ways to batch them live here:

* **stacks that own the weights** (:class:`LinearStack`, :class:`MLPStack`): the members'
  ``Linear`` weights are one ``[G, out, in]`` tensor that each member's module aliases, so a
  step runs every member's rows in one ``baddbmm`` per layer and an optimiser steps one tensor,
  while the per-member modules (what actors, checkpoints and state dicts see) stay as they are.
  SAC's stacked step uses them (:mod:`mtrl.algorithms.sac.stacked_step`), on the CPU and on a
  GPU alike.
* **stacking on the fly** (:func:`run_stacked`, :func:`apply_many`, :func:`encode_many`): the
  modules' weights are stacked at each call (``torch.stack``, differentiable: each task's
  parameter receives its own gradient) and every task's rows padded to the largest count, for
  code that keeps per-task modules as its parameters (IMPALA's :meth:`~mtrl.learner.model.
  MultiTaskModel.embed_many`, SAC's per-task step). By default this runs where the modules live
  on a CUDA GPU (:data:`STACKED`): on a CPU the stacking and padding copies cost more than the
  calls they save.

Modules take part through :func:`stack_signature`: a ``Linear`` or an ``nn.Sequential`` of
``Linear`` layers and parameterless activations. Anything else runs task by task.
``benchmarks/learner_update.py --stacked`` times the on-the-fly stacking on and off side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

__all__ = [
    "STACKED",
    "LinearStack",
    "MLPStack",
    "apply_many",
    "enabled",
    "encode_many",
    "group_by_signature",
    "linear_layers",
    "run_stacked",
    "stack_signature",
]

STACKED: bool | None = None
"""Batch structurally identical per-task modules: True always, False never (one call per
task), None (the default) where the modules live on a CUDA GPU. There a small matmul
costs its launch, whatever its size; on the CPU it costs its arithmetic, which stacking does not
reduce, and the padding and weight copies made MT10's SAC gradient step 0.91x as fast
(``benchmarks/learner_update.py configs/mt10.yaml --stacked``, docs/BENCHMARKS.md)."""


def enabled(modules: Sequence[nn.Module]) -> bool:
    """Whether :data:`STACKED` batches these modules (None: where they live on a CUDA GPU;
    an XLA device compiles the step into one graph, and small calls cost nothing apart)."""
    if STACKED is not None:
        return STACKED
    first = next(modules[0].parameters(), None)
    return first is not None and first.device.type == "cuda"


def _layers(module: nn.Module) -> list[nn.Module]:
    return list(module) if isinstance(module, nn.Sequential) else [module]


def stack_signature(module: nn.Module) -> Hashable | None:
    """What must match for two modules to run stacked (layer kinds and shapes), or None where
    ``module`` is not a ``Linear`` / ``Sequential`` of ``Linear`` and parameterless layers."""
    sig: list[Hashable] = []
    for layer in _layers(module):
        if isinstance(layer, nn.Linear):
            sig.append(("linear", layer.in_features, layer.out_features, layer.bias is not None))
        elif isinstance(layer, nn.Sequential) or any(True for _ in layer.parameters()):
            return None
        else:
            sig.append(type(layer))
    return tuple(sig) if sig else None


def group_by_signature(keys: Sequence[Hashable | None]) -> list[list[int]]:
    """Positions grouped by equal key, in order of first appearance; a None key is a group of
    its own (it cannot stack)."""
    groups: dict[Hashable, list[int]] = {}
    out: list[list[int]] = []
    for i, key in enumerate(keys):
        if key is None:
            out.append([i])
        elif key in groups:
            groups[key].append(i)
        else:
            groups[key] = [i]
            out.append(groups[key])
    return out


def run_stacked(modules: Sequence[nn.Module], xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``[modules[k](xs[k]) for k]`` for modules of one :func:`stack_signature`, each input
    ``[n_k, in]``: one ``baddbmm`` per linear layer over rows padded to ``max n_k``."""
    sizes = [int(x.shape[0]) for x in xs]
    width = max(sizes)
    h = torch.stack(list(xs)) if min(sizes) == width else pad_sequence(list(xs), batch_first=True)
    for layers in zip(*(_layers(m) for m in modules), strict=True):
        first = layers[0]
        if isinstance(first, nn.Linear):
            w = torch.stack([layer.weight for layer in layers]).transpose(1, 2)
            if first.bias is None:
                h = torch.bmm(h, w)
            else:
                h = torch.baddbmm(torch.stack([layer.bias for layer in layers]).unsqueeze(1), h, w)
        else:
            h = first(h)
    return [h[k, :n] for k, n in enumerate(sizes)]


def _grouped(
    modules: Sequence[nn.Module],
    keys: Callable[[], Sequence[Hashable | None]],
    single: Callable[[int], torch.Tensor],
    together: Callable[[list[int]], list[torch.Tensor]],
) -> list[torch.Tensor]:
    if len(modules) < 2 or not enabled(modules):
        return [single(k) for k in range(len(modules))]
    out: list[torch.Tensor] = [torch.empty(0)] * len(modules)
    for group in group_by_signature(keys()):
        ys = [single(group[0])] if len(group) == 1 else together(group)
        for k, y in zip(group, ys, strict=True):
            out[k] = y
    return out


def apply_many(modules: Sequence[nn.Module], xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``[modules[k](xs[k]) for k]`` (inputs ``[n_k, in]``), the modules of one signature run
    together by :func:`run_stacked`, any other one by one."""
    return _grouped(
        modules,
        lambda: [stack_signature(m) for m in modules],
        lambda k: modules[k](xs[k]),
        lambda group: run_stacked([modules[k] for k in group], [xs[k] for k in group]),
    )


def encode_many(
    encoders: Sequence[nn.Module], inputs: Sequence[tuple[object, ...]]
) -> list[torch.Tensor]:
    """``[encoders[k](*inputs[k]) for k]`` over rows (``[n_k, *obs]``). An encoder that is an
    input preparation then an MLP says so with ``stack_input(*inputs) -> [n, in]`` and its
    ``mlp``; those of one MLP signature run together, any other encoder as it is."""
    return _grouped(
        encoders,
        lambda: [
            stack_signature(e.mlp) if hasattr(e, "stack_input") else None  # type: ignore[arg-type]
            for e in encoders
        ],
        lambda k: encoders[k](*inputs[k]),
        lambda group: run_stacked(
            [encoders[k].mlp for k in group],  # type: ignore[misc]
            [encoders[k].stack_input(*inputs[k]) for k in group],  # type: ignore[operator]
        ),
    )


NARROW_OUT = 32
"""Below this many output columns a stacked layer runs its matmul transposed on a CPU (one
core, MKL: 128 inputs, 256 rows a member; forward and backward 2.5-3.5x faster at 2-8
outputs, 1.1x at 24, even at 32)."""


class LinearStack(nn.Module):
    """Same-shaped ``Linear`` layers of several members (tasks, or twin critics × tasks) held
    as one ``[G, in, out]`` weight and ``[G, out]`` bias, which *are* the layers' storage.

    ``members[g]`` is a list of ``Linear`` layers of one input width whose outputs, side by
    side, are member ``g``'s rows of the stack (a policy head's mean and log-std layers become
    one ``[2a, in]`` block); every member has the same list of shapes. After construction each
    layer's ``weight`` and ``bias`` are new parameters that alias their slice of the stack (the
    weight transposed: a ``Linear`` keeps ``[out, in]``), so the per-member modules (what the
    actors act with, what a checkpoint saves and loads) and the stack always hold the same
    numbers, and an optimiser stepping the stack in place updates both. Gradients flow to the
    stack's parameters only, through :meth:`forward`: one ``baddbmm`` for every member's rows
    at once (``x [G, n, in] → [G, n, out]``). The weight is stored input-major so that
    autograd's gradient of that ``baddbmm``, ``xᵀ g``, comes out in the weight's own layout:
    stored ``[G, out, in]``, every weight gradient was a transposed product copied into place
    each step, as costly as the matmul itself on a CPU."""

    def __init__(self, members: Sequence[Sequence[nn.Linear]]) -> None:
        super().__init__()
        shapes = [[(m.in_features, m.out_features, m.bias is not None) for m in g] for g in members]
        if any(s != shapes[0] for s in shapes) or len({s[0] for s in shapes[0]}) != 1:
            raise ValueError(f"members of a LinearStack must share their layer shapes: {shapes}")
        if not all(s[2] for s in shapes[0]):
            raise ValueError("a LinearStack's layers need biases")
        self.members = len(members)
        with torch.no_grad():
            weight = torch.stack([torch.cat([m.weight for m in g]).t() for g in members])
            bias = torch.stack([torch.cat([m.bias for m in g]) for g in members])
        self.weight = nn.Parameter(weight.contiguous())
        self.bias = nn.Parameter(bias)
        for g, layers in enumerate(members):
            at = 0
            for m in layers:
                end = at + m.out_features
                m.weight = nn.Parameter(self.weight.data[g, :, at:end].t(), m.weight.requires_grad)
                m.bias = nn.Parameter(self.bias.data[g, at:end], m.bias.requires_grad)
                at = end

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """``x [G, n, in]`` through every member's layer: ``[G, n, out]`` (``frozen``: no
        gradient reaches the stack's parameters; it still flows to ``x``)."""
        w, b = (self.weight.detach(), self.bias.detach()) if frozen else (self.weight, self.bias)
        out = w.shape[-1]
        if out == 1:  # a value head: a batched call of one output column is a few
            # times slower on a CPU core than the products and the sum it stands for
            return (x * w.transpose(1, 2)).sum(-1, keepdim=True) + b.unsqueeze(1)
        if out < NARROW_OUT and x.device.type == "cpu":
            # a narrow head (a policy's mean and log-std): a CPU core's batched matmul with
            # few output columns runs 2-3x slower, forward and backward, than the same
            # product transposed, with the many rows as its columns
            return torch.baddbmm(b.unsqueeze(2), w.transpose(1, 2), x.transpose(1, 2)).mT
        return torch.baddbmm(b.unsqueeze(1), x, w)


def linear_layers(module: nn.Module) -> list[nn.Linear] | None:
    """The ``Linear`` layers of ``module`` (a ``Linear`` or a ``Sequential`` of ``Linear`` and
    parameterless layers), or None where it is anything else."""
    return (
        [m for m in _layers(module) if isinstance(m, nn.Linear)]
        if stack_signature(module) is not None
        else None
    )


class MLPStack(nn.Module):
    """Several members' MLPs of one :func:`stack_signature` (``Linear`` layers and
    parameterless ones between them) as :class:`LinearStack` layers: ``x [G, n, in] →
    [G, n, out]``, one batched call per ``Linear`` layer, the parameterless layers (the
    activations) applied in the members' order."""

    def __init__(self, mlps: Sequence[nn.Module]) -> None:
        super().__init__()
        sig = stack_signature(mlps[0])
        if sig is None or any(stack_signature(m) != sig for m in mlps):
            raise ValueError("an MLPStack's members must share one stack_signature")
        per_member = [linear_layers(m) or [] for m in mlps]
        self.linears = nn.ModuleList(
            LinearStack([[member[i]] for member in per_member]) for i in range(len(per_member[0]))
        )
        self.order: list[nn.Module | int] = []
        """The members' layers in order: an index into :attr:`linears`, or the (shared,
        parameterless) module itself."""
        at = 0
        for layer in _layers(mlps[0]):
            if isinstance(layer, nn.Linear):
                self.order.append(at)
                at += 1
            else:
                self.order.append(layer)

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        for step in self.order:
            x = self.linears[step](x, frozen) if isinstance(step, int) else step(x)
        return x
