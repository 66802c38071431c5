"""Per-task policy heads and the action distributions they return.

A head maps torso features ``[*B, H]`` to a :class:`PolicyDist` with batch shape ``[*B]``:

* ``Discrete(n)``: a categorical over ``n`` logits; an optional legal-action mask (1 = legal)
  sets illegal logits to the dtype's most negative value, so they are never sampled, the
  greedy action is legal, and log-probs of legal actions stay finite.
* ``MultiDiscrete(nvec)``: independent categoricals (one per entry of ``nvec``, padded to the
  largest ``n``); log-prob and entropy summed. A mask, if any, is the per-entry masks
  concatenated: ``[*B, sum(nvec)]``.
* ``Box``: a diagonal Gaussian over the *raw* action ``u`` (mean from a linear head, a learned
  state-independent log-std initialised to 0 and clamped to ``[LOG_STD_MIN, LOG_STD_MAX]``);
  log-prob summed over the action dims. The env receives
  ``low + (tanh(u) + 1) / 2 * (high - low)`` (:func:`env_actions`), always within bounds.
  The entropy is that of the action the env receives: for a bounded dim, the Gaussian's plus
  ``E[log |da/du|] = log((high − low) / 2) + E[log(1 − tanh²u)]`` (the change of variables),
  the expectation by Gauss–Hermite quadrature (deterministic and differentiable). The raw
  Gaussian's entropy ignores the squash: it rewards a wide ``u`` even where every sample lands
  on the same bound, and nothing stops the mean drifting out where tanh is flat and the policy
  gradient carries no signal (a balanced pendulum then falls in 2 steps for good). The squashed
  entropy falls steeply there, so the entropy bonus pulls the mean back.

Actions are stored raw (0-based indices, unsquashed ``u``), so behaviour and target
log-probs of the same stored action are exact. Heads use orthogonal init with gain 0.01
(CleanRL). No numpy in any forward path.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.learner.encoders import ortho_init

__all__ = [
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "Categorical",
    "CategoricalHead",
    "DiagGaussian",
    "GaussianHead",
    "PolicyDist",
    "env_actions",
    "env_actions_tensor",
    "make_policy_head",
]

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0
_LOG_2PI = math.log(2 * math.pi)
_LOG_2 = math.log(2.0)
#: Nodes and weights of probabilists' Gauss–Hermite quadrature: E[f(ε)] ≈ Σ w_i f(x_i),
#: ε ~ N(0, 1) (weights normalised to sum to 1). Sixteen nodes are within ~1e-5 of the squash
#: term for a std up to ~4 (checked against adaptive quadrature).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(16)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


def log_tanh_jacobian(u: torch.Tensor) -> torch.Tensor:
    """``log(1 − tanh²(u))``, stable for any ``u`` (``2·(log 2 − u − softplus(−2u))``)."""
    return 2.0 * (_LOG_2 - u - torch.nn.functional.softplus(-2.0 * u))


@runtime_checkable
class PolicyDist(Protocol):
    """An action distribution with batch shape ``[*B]`` (the observations' leading shape)."""

    batch_shape: torch.Size

    def sample(self) -> torch.Tensor:
        """Actions ``[*B, *act_shape]`` (no gradient): int64 indices or float raw ``u``."""
        ...

    def mode(self) -> torch.Tensor:
        """Greedy actions ``[*B, *act_shape]``: argmax of the logits / the Gaussian mean."""
        ...

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability (density) of ``actions`` ``[*B, *act_shape]``, summed: ``[*B]``."""
        ...

    def entropy(self) -> torch.Tensor:
        """Entropy summed over action dims: ``[*B]``."""
        ...


def _compute_dtype(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _sum_event(x: torch.Tensor, event_ndim: int) -> torch.Tensor:
    return x.sum(dim=tuple(range(-event_ndim, 0))) if event_ndim else x


class Categorical:
    """Independent categoricals over ``logits [*B, *E, n]``, summed over the ``E`` dims.

    Illegal entries must already hold a very negative logit (see :class:`CategoricalHead`).
    """

    def __init__(self, logits: torch.Tensor, event_ndim: int = 0) -> None:
        self.logits = _compute_dtype(logits)
        self.event_ndim = event_ndim
        self.log_probs = torch.log_softmax(self.logits, dim=-1)
        self.batch_shape = self.logits.shape[: self.logits.ndim - 1 - event_ndim]

    def sample(self) -> torch.Tensor:
        # Gumbel-max; u ≥ tiny bounds the noise below (≈ −4.5), so a logit at finfo.min never
        # beats a legal one.
        with torch.no_grad():
            u = torch.rand_like(self.logits).clamp_(min=torch.finfo(self.logits.dtype).tiny)
            return (self.logits - torch.log(-torch.log(u))).argmax(dim=-1)

    def mode(self) -> torch.Tensor:
        return self.logits.detach().argmax(dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        lp = self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return _sum_event(lp, self.event_ndim)

    def entropy(self) -> torch.Tensor:
        p = self.log_probs.exp()
        return _sum_event(-(p * self.log_probs).sum(-1), self.event_ndim)


class DiagGaussian:
    """Independent normals with ``mean`` and ``log_std`` ``[*B, *E]``, summed over ``E``.

    ``log_half_width`` (``[*E]``, NaN where a dim is unbounded) marks the dims the env squashes
    with tanh into ``[low, high]``: :meth:`entropy` is then the squashed action's entropy.
    """

    def __init__(
        self,
        mean: torch.Tensor,
        log_std: torch.Tensor,
        event_ndim: int,
        log_half_width: torch.Tensor | None = None,
    ) -> None:
        self.mean = _compute_dtype(mean)
        self.log_std = _compute_dtype(log_std).expand_as(self.mean)
        self.event_ndim = event_ndim
        self.batch_shape = self.mean.shape[: self.mean.ndim - event_ndim]
        self.log_half_width = log_half_width

    def sample(self) -> torch.Tensor:
        with torch.no_grad():
            return self.mean + self.log_std.exp() * torch.randn_like(self.mean)

    def mode(self) -> torch.Tensor:
        return self.mean.detach()

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions.to(self.mean.dtype) - self.mean) * torch.exp(-self.log_std)
        return _sum_event(-0.5 * z * z - self.log_std - 0.5 * _LOG_2PI, self.event_ndim)

    def entropy(self) -> torch.Tensor:
        h = 0.5 + 0.5 * _LOG_2PI + self.log_std
        if self.log_half_width is not None:
            h = h + self._squash_log_jacobian()
        return _sum_event(h, self.event_ndim)

    def _squash_log_jacobian(self) -> torch.Tensor:
        """``E[log |da/du|]`` per dim (0 on unbounded dims): quadrature over ``u ~ N(m, s)``."""
        nodes = torch.as_tensor(_GH_NODES, dtype=self.mean.dtype, device=self.mean.device)
        weights = torch.as_tensor(_GH_WEIGHTS, dtype=self.mean.dtype, device=self.mean.device)
        u = self.mean.unsqueeze(-1) + self.log_std.exp().unsqueeze(-1) * nodes
        expected = (log_tanh_jacobian(u) * weights).sum(-1)
        lhw = self.log_half_width.to(self.mean.dtype)
        bounded = torch.isfinite(lhw)
        return torch.where(bounded, expected + torch.where(bounded, lhw, 0.0), 0.0)


class CategoricalHead(nn.Module):
    """Linear → logits for ``Discrete`` (``nvec`` a 0-d array) or ``MultiDiscrete``."""

    supports_mask = True

    def __init__(self, in_dim: int, nvec: np.ndarray) -> None:
        super().__init__()
        nvec = np.asarray(nvec, dtype=np.int64)
        self.act_shape = tuple(nvec.shape)
        flat = nvec.reshape(-1)
        self.total, self.width = int(flat.sum()), int(flat.max())
        self.max_entropy = float(np.log(flat).sum())
        """Entropy of the uniform policy (over all choices, masks aside)."""
        self.linear = ortho_init(nn.Linear(in_dim, self.total), gain=0.01)
        self.padded = bool((flat != self.width).any())
        # index[d, j] = position of choice j of dim d in the flat logits, or `total` (padding).
        index = np.full((flat.size, self.width), self.total, dtype=np.int64)
        offset = 0
        for d, n in enumerate(flat):
            index[d, :n] = np.arange(offset, offset + n)
            offset += n
        self.register_buffer("index", torch.as_tensor(index).reshape(-1), persistent=False)
        self.register_buffer("valid", torch.as_tensor(index < self.total), persistent=False)

    def _layout(self, flat: torch.Tensor, pad) -> torch.Tensor:
        """``[*B, total]`` → ``[*B, *act_shape, width]``, padding slots filled with ``pad``."""
        if self.padded:
            flat = torch.cat([flat, flat.new_full((*flat.shape[:-1], 1), pad)], dim=-1)
            flat = flat.index_select(-1, self.index)
        return flat.reshape(*flat.shape[:-1], *self.act_shape, self.width)

    def forward(self, h: torch.Tensor, action_mask: torch.Tensor | None = None) -> Categorical:
        logits = self._layout(self.linear(h), 0.0)
        legal = None
        if action_mask is not None:
            if action_mask.shape[-1] != self.total:
                raise ValueError(
                    f"action_mask has {action_mask.shape[-1]} entries per step, expected "
                    f"{self.total} (one per discrete choice)"
                )
            valid = self.valid.reshape(*self.act_shape, self.width)
            legal = self._layout(action_mask.to(torch.bool), False) & valid
            # A step with no legal choice (e.g. a finished agent) falls back to all choices.
            legal = legal | (~legal.any(-1, keepdim=True) & valid)
        elif self.padded:
            legal = self.valid.reshape(*self.act_shape, self.width)
        if legal is not None:
            logits = _compute_dtype(logits)
            logits = logits.masked_fill(~legal, torch.finfo(logits.dtype).min)
        return Categorical(logits, event_ndim=len(self.act_shape))


class GaussianHead(nn.Module):
    """Linear → mean of the raw action; state-independent learned log-std.

    The log-std is stored divided by ``log_std_step_scale`` (``log_std_param``): Adam and
    RMSprop move a parameter by about the learning rate per update whatever its gradient's
    size, and this one scalar per action dim aggregates the whole batch, so at IMPALA's one
    pass per batch it would move at most ~lr per update — too slow to narrow the policy before
    the learning rate anneals (InvertedPendulum's σ stayed near 1, and its stochastic return
    near 860 of 1000). Scaling the stored value makes it move ``log_std_step_scale`` times as
    fast as the network's weights; the distribution and its gradient direction are unchanged.
    """

    supports_mask = False

    def __init__(
        self,
        in_dim: int,
        act_shape: tuple[int, ...],
        low: np.ndarray | None = None,
        high: np.ndarray | None = None,
        log_std_step_scale: float = 1.0,
    ) -> None:
        """``low``/``high`` (the Box's bounds) make the entropy that of the squashed action
        on the dims bounded on both sides; without them it is the raw Gaussian's."""
        super().__init__()
        if not log_std_step_scale > 0:
            raise ValueError(f"log_std_step_scale must be > 0, got {log_std_step_scale}")
        self.act_shape = tuple(int(d) for d in act_shape)
        self.step_scale = float(log_std_step_scale)
        self.mean = ortho_init(nn.Linear(in_dim, int(np.prod(self.act_shape))), gain=0.01)
        self.log_std_param = nn.Parameter(torch.zeros(self.act_shape))
        lhw = None
        self.squashed = False
        """Whether any dim is tanh-squashed into its bounds with the squashed action's
        entropy (bounds given, finite on both sides)."""
        if low is not None and high is not None:
            lo = np.broadcast_to(np.asarray(low, np.float64), self.act_shape)
            hi = np.broadcast_to(np.asarray(high, np.float64), self.act_shape)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                half = np.where(np.isfinite(lo) & np.isfinite(hi), (hi - lo) / 2, np.nan)
                lhw = torch.as_tensor(np.log(np.where(half > 0, half, np.nan)), dtype=torch.float32)
            self.squashed = bool((half > 0).any())
        self.log_half_width: torch.Tensor | None
        self.register_buffer("log_half_width", lhw, persistent=False)

    @property
    def log_std(self) -> torch.Tensor:
        """The log-std itself (unclamped): ``log_std_param * log_std_step_scale``."""
        return self.log_std_param * self.step_scale

    def set_log_std(self, value: torch.Tensor | float) -> None:
        """Set the log-std (not the stored, scaled-down parameter)."""
        with torch.no_grad():
            self.log_std_param.copy_(torch.as_tensor(value) / self.step_scale)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        """Checkpoints from before the step scale stored the log-std itself as ``log_std``."""
        old = state_dict.pop(prefix + "log_std", None)
        if old is not None and prefix + "log_std_param" not in state_dict:
            state_dict[prefix + "log_std_param"] = old / self.step_scale
        super()._load_from_state_dict(state_dict, prefix, *args)

    def forward(self, h: torch.Tensor, action_mask: torch.Tensor | None = None) -> DiagGaussian:
        if action_mask is not None:
            raise ValueError("an action_mask is meaningless for a Box action space")
        mean = self.mean(h).reshape(*h.shape[:-1], *self.act_shape)
        log_std = self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        return DiagGaussian(mean, log_std, len(self.act_shape), self.log_half_width)


def make_policy_head(
    space: gym.Space,
    in_dim: int,
    what: str = "policy head",
    squashed_entropy: bool = True,
    log_std_step_scale: float = 1.0,
) -> nn.Module:
    """The head of one action space: ``forward(h [*B, in_dim], action_mask=None)`` → dist.

    ``squashed_entropy``: a ``Box`` head's entropy is the squashed action's (else the raw
    Gaussian's); ``log_std_step_scale``: see :class:`GaussianHead`."""
    if isinstance(space, spaces.Discrete):
        return CategoricalHead(in_dim, np.array(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return CategoricalHead(in_dim, space.nvec)
    if isinstance(space, spaces.Box):
        bounds = (space.low, space.high) if squashed_entropy else (None, None)
        return GaussianHead(in_dim, space.shape, *bounds, log_std_step_scale=log_std_step_scale)
    raise TypeError(
        f"{what}: no policy head for action space {space!r}; supported: Discrete, "
        "MultiDiscrete, Box"
    )


def _start(space: spaces.Discrete | spaces.MultiDiscrete) -> np.ndarray:
    return np.asarray(space.start, dtype=np.int64)


def env_actions(space: gym.Space, raw: torch.Tensor | np.ndarray) -> np.ndarray:
    """Stored raw actions ``[N, *act_shape]`` → what ``space``'s env accepts, on the host.

    Takes a tensor or a numpy array (actor processes convert the raw actions the inference
    server wrote into shared memory without touching torch).

    Discrete / MultiDiscrete: index + ``start``, in the space's dtype. Box: the tanh squash into
    ``[low, high]`` (computed in float64, clipped, then cast to the space's dtype); dims with an
    infinite bound get ``u`` clipped to the finite side, if any.
    """
    x = raw if isinstance(raw, np.ndarray) else raw.detach().cpu().numpy()
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return (x.astype(np.int64) + _start(space)).astype(space.dtype)
    if isinstance(space, spaces.Box):
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        u = x.astype(np.float64)
        bounded = np.isfinite(low) & np.isfinite(high)
        with np.errstate(invalid="ignore"):
            squashed = low + (np.tanh(u) + 1.0) * 0.5 * (high - low)
        return np.clip(np.where(bounded, squashed, u), low, high).astype(space.dtype)
    raise TypeError(f"env_actions: unsupported action space {space!r}")


def env_actions_tensor(space: gym.Space, raw: torch.Tensor) -> torch.Tensor:
    """As :func:`env_actions` but stays on ``raw``'s device (tensor-native envs, Anakin).

    Box actions come out in ``raw``'s float dtype, discrete ones as int64.
    """
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return raw.long() + torch.as_tensor(_start(space), device=raw.device)
    if isinstance(space, spaces.Box):
        low = torch.as_tensor(space.low, dtype=raw.dtype, device=raw.device)
        high = torch.as_tensor(space.high, dtype=raw.dtype, device=raw.device)
        bounded = torch.isfinite(low) & torch.isfinite(high)
        squashed = low + (torch.tanh(raw) + 1.0) * 0.5 * (high - low)
        return torch.where(bounded, squashed, raw).clamp(low, high)
    raise TypeError(f"env_actions_tensor: unsupported action space {space!r}")
