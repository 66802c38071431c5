"""Per-task observation encoders, chosen from the task's observation space.

:func:`make_encoder` maps a gymnasium space to a module that takes observations of any leading
batch shape ``[*B, *obs_shape]`` (as the env produced them, e.g. ``uint8`` frames) and returns
features ``[*B, encoder_dim]``. Casting and scaling happen inside, on the model's device, so
actors ship raw (small) dtypes. Layers use orthogonal init with gain √2 and zero biases
(the CleanRL convention).

==============================  ===========================================================
space                           encoder
==============================  ===========================================================
Box, 1 dim (or other ranks)     flatten → MLP of ``encoder_layers`` × ``encoder_dim`` units
Box, 3 dims ``(C, H, W)``       scale integer frames by the space's ``high``; Nature-DQN CNN
                                (Mnih et al. 2015) if H, W ≥ 36, else one 3x3 conv with 16
                                channels (MinAtar, Young & Tian 2019); Linear → encoder_dim.
                                ``(H, W, C)`` is transposed: C ≤ 4 < H, or C ≤ 4 and
                                read as ``(C, H, W)`` the image is under 3x3.
Discrete                        one-hot → MLP
MultiBinary / MultiDiscrete     flatten / concatenated one-hots → MLP
Text (as :class:`TokenSpace`)   token embedding (padding id 0 → zero vector) → 1-D conv
                                (kernel 3, 64 channels) → max-pool over the non-padding
                                positions → Linear → encoder_dim
Dict                            one encoder per key (not ``action_mask``), concat → Linear
Tuple                           one encoder per element, concat → Linear (as Dict)
==============================  ===========================================================

Text arrives tokenised: the plugin layer turns strings into ``int32 [max_length]`` token ids at
the env boundary (:mod:`mtrl.plugins.text`, vocabulary in :mod:`mtrl.token_space`), so the
space the model is built for is a :class:`TokenSpace`; a raw ``Text`` space is read as its
TokenSpace. Why a conv and max-pool rather than a GRU: missions are short and their meaning
sits in a few words (BabyAI's "go to the red door"), which a width-3 conv sees as n-grams
anywhere in the string; it runs in parallel over positions (a GRU steps ``max_length`` times on
every ``[T + 1, N]`` batch), and a max over the non-padding positions makes the features
independent of how much padding follows the string.

Any other space (Graph, Sequence, OneOf, ...) raises :class:`UnsupportedSpaceError`
naming the part of the observation, e.g. ``obs['graph']``, so checks can report it before a run.
A Tuple observation is carried as a ``dict`` keyed ``"0"``, ``"1"``, ... (one array per
element, exactly like Dict parts); its encoder also takes a tuple or list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from mtrl.config.learner import ModelConfig
from mtrl.errors import UserError
from mtrl.token_space import PAD_ID, TokenSpace, is_string_space

__all__ = [
    "ACTION_MASK_KEY",
    "SUPPORTED_OBSERVATION_SPACES",
    "UnsupportedSpaceError",
    "VectorWithExtra",
    "activation",
    "make_encoder",
    "make_mlp",
    "ortho_init",
    "takes_extra_input",
]

ACTION_MASK_KEY = "action_mask"
"""Key of a Dict observation holding the legal-action mask (1 = legal); not encoded."""

SUPPORTED_OBSERVATION_SPACES = (
    "Box (vector, or image (C, H, W) / (H, W, C)), Discrete, MultiDiscrete, MultiBinary, "
    "Text (or any space whose samples are strings), and Dict or Tuple of these"
)
"""What :func:`make_encoder` can encode, for error messages and docs."""


class UnsupportedSpaceError(UserError, TypeError):
    """A space, or a part of one, the learner cannot train on.

    ``path`` names the part (``obs``, ``obs['graph']``, ``obs[1]``, ``action``) and ``reason``
    says what is wrong with it; ``str()`` is ``"<what>: <path>: <reason>"``.
    """

    def __init__(self, path: str, reason: str, what: str = "") -> None:
        super().__init__(f"{what}: {path}: {reason}" if what else f"{path}: {reason}")
        self.path = path
        self.reason = reason


_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}

_NATURE_MIN_SIZE = 36  # smallest H, W the Nature-DQN conv stack (8/4, 4/2, 3/1) accepts
_TEXT_EMBED_DIM = 32  # token embedding width: a few dozen characters need no more
_TEXT_KERNEL = 3  # conv width over tokens: character trigrams
_TEXT_CHANNELS = 64  # conv filters: enough n-gram detectors for short missions, and cheap (a
# 256-channel conv costs the inference server several times more per step on CPU)


def activation(name: str) -> nn.Module:
    """A fresh nonlinearity module by config name (``relu``, ``tanh``, ``gelu``)."""
    try:
        return _ACTIVATIONS[name]()
    except KeyError:
        choices = sorted(_ACTIVATIONS)
        raise ValueError(f"unknown activation {name!r}; choose from {choices}") from None


def ortho_init(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights with ``gain`` and zero bias, in place; returns ``layer``."""
    nn.init.orthogonal_(layer.weight, gain)
    if getattr(layer, "bias", None) is not None:
        nn.init.zeros_(layer.bias)
    return layer


def make_mlp(in_dim: int, widths: Sequence[int], act: str) -> nn.Sequential:
    """``Linear → act`` for each width (an empty ``widths`` gives the identity).

    A ReLU acts in place on its ``Linear``'s fresh output (a ``Linear``'s backward needs its
    input, not its output): one activation-sized tensor fewer to allocate and write per layer,
    which on a CPU core costs about as much as the ReLU itself."""
    layers: list[nn.Module] = []
    for width in widths:
        nonlinearity = nn.ReLU(inplace=True) if act == "relu" else activation(act)
        layers += [ortho_init(nn.Linear(in_dim, width)), nonlinearity]
        in_dim = width
    return nn.Sequential(*layers)


class _Leaf(nn.Module):
    """Base of single-tensor encoders: checks the trailing shape and folds the batch dims."""

    def __init__(self, obs_shape: tuple[int, ...], what: str) -> None:
        super().__init__()
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.what = what

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch, rows = self._rows(obs)
        out = self.encode(rows)
        return out.reshape(*batch, out.shape[-1])

    def _rows(self, obs: torch.Tensor) -> tuple[torch.Size, torch.Tensor]:
        """The batch dims and the observations as rows ``[M, *obs_shape]``, checked."""
        if not isinstance(obs, torch.Tensor):
            raise TypeError(
                f"{self.what}: observation must be a torch.Tensor, got {type(obs).__name__}; "
                "convert with torch.as_tensor (see mtrl.learner.model.obs_to_tensor)"
            )
        nd = len(self.obs_shape)
        if obs.ndim < nd or tuple(obs.shape[obs.ndim - nd :]) != self.obs_shape:
            raise ValueError(
                f"{self.what}: observation of shape {tuple(obs.shape)} does not end in the "
                f"space's shape {self.obs_shape}"
            )
        return obs.shape[: obs.ndim - nd], obs.reshape(-1, *self.obs_shape)

    def encode(self, x: torch.Tensor) -> torch.Tensor:  # [M, *obs_shape] -> [M, D]
        raise NotImplementedError

    def _float(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(next(self.parameters()).dtype)


class _Features(_Leaf):
    """Flatten (optionally one-hot / scale) then an MLP of ``encoder_layers`` hidden layers."""

    def __init__(self, obs_shape, what, in_dim: int, cfg: ModelConfig, prep=None) -> None:
        super().__init__(obs_shape, what)
        self.prep = prep
        self.mlp = make_mlp(in_dim, [cfg.encoder_dim] * cfg.encoder_layers, cfg.activation)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self._prepare(x))

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prep(x) if self.prep is not None else x.reshape(x.shape[0], -1)
        return self._float(x)

    def stack_input(self, obs: torch.Tensor) -> torch.Tensor:
        """Rows ``[n, *obs]`` as the MLP's input ``[n, in]`` (to run several tasks' MLPs at
        once: :func:`mtrl.learner.stacked.encode_many`)."""
        return self._prepare(self._rows(obs)[1])


def takes_extra_input(space: gym.Space) -> bool:
    """Whether :class:`VectorWithExtra` can encode ``space``: a ``Box`` read as a flat vector
    (any rank but an image's 3; not tokenised text)."""
    return (
        isinstance(space, spaces.Box)
        and not isinstance(space, TokenSpace)
        and not is_string_space(space)
        and len(space.shape) != 3
    )


class VectorWithExtra(nn.Module):
    """A flat ``Box`` observation and extra float columns through one MLP (the vector
    encoder's ``encoder_layers`` hidden layers): ``[*B, *obs]``, ``[*B, extra]`` →
    ``[*B, encoder_dim]``.

    SAC's critic reads ``[obs, action]`` this way, so the action meets the state in the first
    layer. The observation is scaled and flattened exactly as :func:`make_encoder` does it.
    """

    def __init__(self, space: spaces.Box, extra: int, cfg: ModelConfig, what: str) -> None:
        super().__init__()
        if not takes_extra_input(space):
            raise UnsupportedSpaceError("obs", "not a flat Box observation", what)
        self.obs_shape = tuple(int(d) for d in space.shape)
        self.scale = _Scale(space, flatten=True)
        size = int(np.prod(self.obs_shape))
        self.mlp = make_mlp(size + extra, [cfg.encoder_dim] * cfg.encoder_layers, cfg.activation)

    def forward(self, obs: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        batch = obs.shape[: obs.ndim - len(self.obs_shape)]
        out = self.mlp(self.stack_input(obs, extra))
        return out.reshape(*batch, out.shape[-1])

    def stack_input(self, obs: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        """The MLP's input ``[M, obs + extra]``: the scaled, flattened observation and the
        extra columns side by side (also what :func:`mtrl.learner.stacked.encode_many` runs
        several tasks' MLPs on)."""
        x = self.scale(obs.reshape(-1, *self.obs_shape))
        dtype = next(self.mlp.parameters()).dtype
        return torch.cat([x.to(dtype), extra.reshape(x.shape[0], -1).to(dtype)], dim=-1)


class _Scale(nn.Module):
    """Multiply integer-valued observations by ``1/high`` (per element), then flatten or not."""

    def __init__(self, space: spaces.Box, flatten: bool) -> None:
        super().__init__()
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), space.shape)
        integer = np.issubdtype(space.dtype, np.integer) or space.dtype == np.bool_
        scale = 1.0 / high if integer and np.all(np.isfinite(high)) and np.all(high > 0) else None
        self.register_buffer(
            "inv_high",
            None if scale is None else torch.as_tensor(scale, dtype=torch.float32),
            persistent=False,
        )
        self.flatten = flatten

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inv_high is not None:
            x = x.to(self.inv_high.dtype) * self.inv_high
        return x.reshape(x.shape[0], -1) if self.flatten else x


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


def _channels_last(shape: tuple[int, ...]) -> bool:
    """Whether a 3-dim image is ``(H, W, C)``: its last dim is at most 4 and either its first
    is more than 4 (``(84, 84, 3)``) or reading it as ``(C, H, W)`` would leave H or W below the
    smallest conv's 3 while ``(H, W, C)`` does not (a ``(3, 3, 2)`` tic-tac-toe board)."""
    c, h, w = (int(d) for d in shape)
    return w <= 4 and (c > 4 or min(h, w) < 3 <= min(c, h))


class _ImageEncoder(_Leaf):
    def __init__(self, space: spaces.Box, what: str, cfg: ModelConfig, path: str = "obs") -> None:
        super().__init__(space.shape, what)
        c, h, w = space.shape
        self.channels_last = _channels_last(space.shape)
        if self.channels_last:
            h, w, c = space.shape
        self.scale = _Scale(space, flatten=False)
        act = cfg.activation
        if min(h, w) >= _NATURE_MIN_SIZE:
            specs = [(32, 8, 4), (64, 4, 2), (64, 3, 1)]
        else:
            specs = [(16, 3, 1)]
        layers: list[nn.Module] = []
        for out_ch, kernel, stride in specs:
            layers += [ortho_init(nn.Conv2d(c, out_ch, kernel, stride)), activation(act)]
            c, h, w = out_ch, _conv_out(h, kernel, stride), _conv_out(w, kernel, stride)
        if min(h, w) < 1:
            raise UnsupportedSpaceError(
                path,
                f"image {space.shape} is too small for a 3x3 conv (H and W must be at least 3)",
                what,
            )
        self.conv = nn.Sequential(*layers, nn.Flatten())
        self.out = nn.Sequential(ortho_init(nn.Linear(c * h * w, cfg.encoder_dim)), activation(act))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        x = self._float(self.scale(x))
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.out(self.conv(x))


class _TextEncoder(_Leaf):
    """Token ids ``[M, max_length]`` → embedding → conv → masked max-pool → Linear.

    Padding (id 0) embeds to a zero vector (``padding_idx``), exactly what the conv's own zero
    padding feeds the edges, and is excluded from the max; so a string's features do not
    depend on how much padding follows it. An all-padding (empty) string gives zero pooled
    features.
    """

    def __init__(self, space: TokenSpace, what: str, cfg: ModelConfig) -> None:
        super().__init__(space.shape, what)
        self.embed = nn.Embedding(space.vocab_size, _TEXT_EMBED_DIM, padding_idx=PAD_ID)
        self.conv = ortho_init(
            nn.Conv1d(_TEXT_EMBED_DIM, _TEXT_CHANNELS, _TEXT_KERNEL, padding=_TEXT_KERNEL // 2)
        )
        self.act = activation(cfg.activation)
        self.out = nn.Sequential(
            ortho_init(nn.Linear(_TEXT_CHANNELS, cfg.encoder_dim)), activation(cfg.activation)
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.long()
        keep = tokens != PAD_ID  # [M, L]
        h = self.act(self.conv(self.embed(tokens).transpose(1, 2)))  # [M, C, L]
        h = h.masked_fill(~keep[:, None, :], float("-inf")).amax(dim=-1)
        h = torch.where(keep.any(dim=-1, keepdim=True), h, torch.zeros_like(h))
        return self.out(h)


class _OneHot(nn.Module):
    """Integers ``[M, *shape]`` → concatenated one-hots ``[M, sum(nvec)]``."""

    def __init__(self, nvec: np.ndarray, start: np.ndarray) -> None:
        super().__init__()
        nvec = np.asarray(nvec, dtype=np.int64).reshape(-1)
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        start = np.broadcast_to(np.asarray(start, dtype=np.int64), nvec.shape)
        self.register_buffer("shift", torch.as_tensor(offsets - start), persistent=False)
        self.size = int(nvec.sum())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = x.reshape(x.shape[0], -1).long() + self.shift
        out = torch.zeros(x.shape[0], self.size, device=x.device)
        return out.scatter_(1, idx, 1.0)


class _DictEncoder(nn.Module):
    """One encoder per part (``parts`` keyed by name), features concatenated → Linear."""

    def __init__(
        self, parts: dict[str, gym.Space], what: str, cfg: ModelConfig, paths: dict[str, str]
    ) -> None:
        super().__init__()
        self.keys = list(parts)
        self.parts = nn.ModuleDict(
            {k: make_encoder(parts[k], cfg, f"{what}[{k!r}]", paths[k]) for k in self.keys}
        )
        self.out = nn.Sequential(
            ortho_init(nn.Linear(len(self.keys) * cfg.encoder_dim, cfg.encoder_dim)),
            activation(cfg.activation),
        )
        self.what = what

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        if not isinstance(obs, dict):
            raise TypeError(f"{self.what}: Dict observation must be a dict, got {type(obs)}")
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise KeyError(f"{self.what}: observation lacks keys {missing} (has {list(obs)})")
        return self.out(torch.cat([self.parts[k](obs[k]) for k in self.keys], dim=-1))


class _TupleEncoder(_DictEncoder):
    """A Tuple observation: element ``i`` is part ``"i"`` (a dict, tuple or list goes in)."""

    def forward(self, obs: Any) -> torch.Tensor:
        if isinstance(obs, tuple | list):
            if len(obs) != len(self.keys):
                raise ValueError(
                    f"{self.what}: Tuple observation has {len(obs)} elements, expected "
                    f"{len(self.keys)}"
                )
            obs = {str(i): x for i, x in enumerate(obs)}
        return super().forward(obs)


def _space_kind(space: gym.Space) -> str:
    return type(space).__name__


def make_encoder(
    space: gym.Space, cfg: ModelConfig, what: str = "encoder", path: str = "obs"
) -> nn.Module:
    """The encoder of one observation space: ``[*B, *obs_shape]`` → ``[*B, encoder_dim]``.

    ``what`` names the encoder in error messages (e.g. ``task 2 'pong'``); ``path`` names the
    part of the observation being encoded (``obs``, ``obs['graph']``, ``obs[1]``). A space with
    no encoder raises :class:`UnsupportedSpaceError` carrying that path.
    """
    if isinstance(space, spaces.Dict):
        keys = [k for k in space.spaces if k != ACTION_MASK_KEY]
        if not keys:
            raise UnsupportedSpaceError(
                path, f"Dict observation has nothing to encode besides {ACTION_MASK_KEY!r}", what
            )
        parts = {k: space.spaces[k] for k in keys}
        return _DictEncoder(parts, what, cfg, {k: f"{path}[{k!r}]" for k in keys})
    if isinstance(space, spaces.Tuple):
        if not space.spaces:
            raise UnsupportedSpaceError(path, "Tuple observation has no elements", what)
        parts = {str(i): s for i, s in enumerate(space.spaces)}
        return _TupleEncoder(parts, what, cfg, {str(i): f"{path}[{i}]" for i in range(len(parts))})
    if is_string_space(space):  # what the env boundary turns it into
        space = TokenSpace.from_space(space)
    if isinstance(space, TokenSpace):
        return _TextEncoder(space, what, cfg)
    if isinstance(space, spaces.Box):
        if len(space.shape) == 3:
            return _ImageEncoder(space, what, cfg, path)
        size = int(np.prod(space.shape))
        return _Features(space.shape, what, size, cfg, _Scale(space, flatten=True))
    if isinstance(space, spaces.Discrete):
        hot = _OneHot(np.array([space.n]), np.array([space.start]))
        return _Features((), what, hot.size, cfg, hot)
    if isinstance(space, spaces.MultiDiscrete):
        hot = _OneHot(space.nvec, space.start)
        return _Features(space.shape, what, hot.size, cfg, hot)
    if isinstance(space, spaces.MultiBinary):
        return _Features(space.shape, what, int(np.prod(space.shape)), cfg)
    raise UnsupportedSpaceError(
        path,
        f"{_space_kind(space)} spaces are not supported; supported: {SUPPORTED_OBSERVATION_SPACES}",
        what,
    )
