"""Observations normalised by running statistics (``learner.sac.normalize_obs``).

Each task with float vector observations gets one :class:`RunningObsNorm`: the running count,
mean and variance of its observations (buffers, float64), merged with every unroll's
observations as the learner stores it in the replay (:func:`merge_moments`: the parallel
update of Chan et al., exact for any split of the data), and :func:`normalize` maps an
observation to ``(x − mean) / sqrt(var + 1e-8)`` clipped to ±10, as Stable-Baselines3's
``VecNormalize`` and BRO do.

Where it acts: the one module is put in front of the input preparation of the task's policy
encoder and of both critics' and both target critics' encoders (:class:`NormalizedInput`), so
every network of the learner's per-task step reads normalised observations, and so does the
actors' policy — the statistics are buffers of the model, in its ``state_dict``, so they travel
to the actors with the weights and into checkpoints. The replay keeps raw observations: a
gradient step normalises them under the statistics of the moment. The stacked step runs its
encoders' MLPs on the raw block and normalises it first with the group's statistics stacked
(:func:`stacked_normalizer`), the same arithmetic.

Images (scaled by the conv encoder), integers scaled by their bounds, text, Dict and Tuple
observations are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.learner.encoders import takes_extra_input

__all__ = [
    "CLIP",
    "EPSILON",
    "NormalizedInput",
    "ObsNorms",
    "RunningObsNorm",
    "combine_moments",
    "encoder_norm",
    "for_learner",
    "install",
    "merge_moments",
    "normalize",
    "normalizes",
    "prepare_model",
    "stacked_normalizer",
]

CLIP = 10.0
"""Normalised observations are clipped to ``[−CLIP, CLIP]`` (Stable-Baselines3's default)."""
EPSILON = 1e-8
"""Added to the variance under the square root (a constant feature divides by ``1e-4``)."""


def merge_moments(
    count: float, mean: np.ndarray, var: np.ndarray, batch: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """The count, mean and (population) variance of the data summarised by ``count``,
    ``mean``, ``var`` together with the rows of ``batch`` ``[n, d]`` (Chan et al.'s parallel
    update; float64)."""
    n = len(batch)
    if n == 0:
        return count, mean, var
    rows = np.asarray(batch, np.float64).reshape(n, -1)
    return combine_moments((count, mean, var), (float(n), rows.mean(0), rows.var(0)))


def combine_moments(
    a: tuple[float, np.ndarray, np.ndarray], b: tuple[float, np.ndarray, np.ndarray]
) -> tuple[float, np.ndarray, np.ndarray]:
    """The count, mean and population variance of two parts of the data, each summarised by
    its own (Chan et al.'s parallel update: exact for any split; an actor summarises its
    unroll where it stores it, the learner merges)."""
    count, mean, var = a
    n, b_mean, b_var = b
    if n == 0:
        return count, mean, var
    total = count + n
    delta = b_mean - mean
    new_mean = mean + delta * (n / total)
    m2 = var * count + b_var * n + delta**2 * (count * n / total)
    return total, new_mean, m2 / total


def normalize(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """``(x − mean) / sqrt(var + EPSILON)`` clipped to ±:data:`CLIP`, in ``x``'s dtype
    (``mean`` and ``var`` broadcast against ``x``)."""
    scale = torch.rsqrt(var.to(x.dtype) + EPSILON)
    return ((x - mean.to(x.dtype)) * scale).clamp(-CLIP, CLIP)


class RunningObsNorm(nn.Module):
    """One task's running statistics (count, mean and variance of its flattened observation,
    float64 buffers) and the normalisation they define."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.count: torch.Tensor
        self.mean: torch.Tensor
        self.var: torch.Tensor
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))

    @torch.no_grad()
    def observe(self, obs: np.ndarray) -> None:
        """Take in observations ``[n, *obs]`` (host arrays), in place (the tensors keep their
        addresses: a recorded CUDA graph reads them there)."""
        self.take(
            merge_moments(float(self.count), self.mean.cpu().numpy(), self.var.cpu().numpy(), obs)
        )

    @torch.no_grad()
    def observe_moments(self, moments: tuple[float, np.ndarray, np.ndarray]) -> None:
        """Take in observations summarised by their count, mean and variance, in place."""
        mine = (float(self.count), self.mean.cpu().numpy(), self.var.cpu().numpy())
        self.take(combine_moments(mine, moments))

    def take(self, moments: tuple[float, np.ndarray, np.ndarray]) -> None:
        """Set the statistics to ``moments`` in place (the tensors keep their addresses: a
        recorded CUDA graph reads them there)."""
        count, mean, var = moments
        self.count.fill_(count)
        self.mean.copy_(torch.from_numpy(mean))
        self.var.copy_(torch.from_numpy(var))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Rows ``[M, *obs]`` normalised, the same shape (float)."""
        flat = x.reshape(x.shape[0], -1)
        if not flat.is_floating_point():
            flat = flat.float()
        return normalize(flat, self.mean, self.var).reshape(x.shape)


class NormalizedInput(nn.Module):
    """An encoder's input preparation (``prep`` or ``scale``) behind a task's
    :class:`RunningObsNorm`: the observation is normalised, then prepared as before."""

    def __init__(self, norm: RunningObsNorm, inner: nn.Module) -> None:
        super().__init__()
        self.norm = norm
        self.inner = inner

    @property
    def inv_high(self) -> torch.Tensor | None:
        """The wrapped preparation's integer scaling (None for the float observations
        normalised here: what the stacked step asks to stack an encoder)."""
        return getattr(self.inner, "inv_high", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(self.norm(x))


def normalizes(space: spaces.Space) -> bool:
    """Whether ``normalize_obs`` normalises observations of ``space``: a float ``Box`` read as
    a flat vector (not an image, not text)."""
    return takes_extra_input(space) and np.issubdtype(space.dtype, np.floating)


def _slot(encoder: nn.Module) -> str | None:
    """The attribute of ``encoder`` holding its input preparation (``prep`` of the vector
    encoder, ``scale`` of the critic's observation-and-action encoder), or None."""
    for name in ("prep", "scale"):
        if isinstance(getattr(encoder, name, None), nn.Module):
            return name
    return None


def _wrap(encoder: nn.Module, norm: RunningObsNorm) -> None:
    """Put ``norm`` in front of ``encoder``'s input preparation (in place)."""
    name = _slot(encoder)
    if name is None:
        raise RuntimeError(f"{type(encoder).__name__} has no input preparation to normalise")
    current = getattr(encoder, name)
    if isinstance(current, NormalizedInput):
        current.norm = norm
        return
    setattr(encoder, name, NormalizedInput(norm, current))


class ObsNorms:
    """The running statistics of one learner's tasks (None where a task's observations are
    not normalised) and what takes in each unroll."""

    def __init__(self, norms: Sequence[RunningObsNorm | None]) -> None:
        self.norms = list(norms)

    def observe(self, task: int, obs: Any) -> None:
        """Take in an unroll's observations ``[T + 1, N, *obs]`` (rows ``0..T−1``: row ``T``
        is the next unroll's row 0)."""
        norm = self.norms[task]
        if norm is not None:
            rows = np.asarray(obs)[:-1]
            norm.observe(rows.reshape(-1, *rows.shape[2:]))

    def observe_moments(self, task: int, moments: tuple[float, np.ndarray, np.ndarray]) -> None:
        """Take in an unroll's observations as summarised by the actor that stored it
        (:func:`mtrl.actors.shard_insert.obs_moments`: the same rows as :meth:`observe`)."""
        norm = self.norms[task]
        if norm is not None:
            norm.observe_moments(moments)


def install(model: nn.Module, critics: Sequence[Any], device: torch.device) -> ObsNorms:
    """One :class:`RunningObsNorm` per task of ``model`` whose observations
    :func:`normalizes`, in front of its policy encoder and its encoders in each of
    ``critics`` (:class:`~mtrl.algorithms.sac.networks.MultiTaskCritic`: both critics and both
    target critics share the task's statistics)."""
    norms: list[RunningObsNorm | None] = []
    for k, task in enumerate(model.spaces):
        space = task.observation_space
        if not normalizes(space):
            norms.append(None)
            continue
        norm = RunningObsNorm(int(np.prod(space.shape))).to(device)
        for encoder in [model.encoders[k], *(q.encoders[k] for q in critics)]:
            _wrap(encoder, norm)
        norms.append(norm)
    return ObsNorms(norms)


def for_learner(learner: Any) -> ObsNorms | None:
    """A :class:`~mtrl.algorithms.sac.learner.SacLearner`'s statistics, installed in its
    policy, critics and target critics (:func:`install`), or None without
    ``learner.sac.normalize_obs``."""
    if not learner.sac.normalize_obs:
        return None
    critics = [learner.critic.q1, learner.critic.q2, learner.target.q1, learner.target.q2]
    return install(learner.model, critics, learner.device)


def encoder_norm(encoder: nn.Module) -> RunningObsNorm | None:
    """The statistics in front of ``encoder``'s input, or None."""
    name = _slot(encoder)
    prep = getattr(encoder, name) if name is not None else None
    return prep.norm if isinstance(prep, NormalizedInput) else None


def stacked_normalizer(
    encoders: Sequence[nn.Module],
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """For one group of the stacked step: a function normalising its raw block
    ``[K_g, m, obs]`` with each task's statistics (read at each call, so they are current),
    or None where the group's encoders are not normalised."""
    norms = [encoder_norm(e) for e in encoders]
    if all(n is None for n in norms):
        return None
    if any(n is None for n in norms):
        raise RuntimeError("a stacked group mixes normalised and raw observations")
    kept = [n for n in norms if n is not None]

    def apply(block: torch.Tensor) -> torch.Tensor:
        mean = torch.stack([n.mean for n in kept]).unsqueeze(1)
        var = torch.stack([n.var for n in kept]).unsqueeze(1)
        return normalize(block, mean, var)

    return apply


def _install_saved(module: nn.Module, state: dict[str, Any], prefix: str, *_: Any) -> None:
    """A load pre-hook of a model built for ``mtrl eval``: put a :class:`RunningObsNorm` in
    front of each policy encoder whose statistics the checkpoint holds (a run trained with
    ``normalize_obs``), so the model loads them and acts as the actors did."""
    for k, encoder in enumerate(module.encoders):
        name = _slot(encoder)
        key = f"{prefix}encoders.{k}.{name}.norm.mean"
        if name is not None and key in state and encoder_norm(encoder) is None:
            device = next(encoder.parameters()).device
            _wrap(encoder, RunningObsNorm(int(state[key].numel())).to(device))


def prepare_model(model: nn.Module) -> None:
    """SAC's model to act (the rule's ``prepare_model``, for ``mtrl eval``): its
    squashed-Gaussian heads, and the observation statistics a checkpoint brings."""
    from mtrl.algorithms.sac.networks import install_policy_heads

    install_policy_heads(model)
    model.register_load_state_dict_pre_hook(_install_saved)
