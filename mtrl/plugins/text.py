"""Text observations at the env boundary: strings become token ids before actors see them.

Unroll slots are preallocated numeric arrays sized from the observation space, so a
``gymnasium.spaces.Text`` part (an instruction), or any other space whose samples are strings
(MiniGrid's ``MissionSpace``; :func:`~mtrl.token_space.is_string_space`), cannot be stored as
it comes. :meth:`mtrl.plugins.spec.EnvSpec.build` — the one place every env kind is built
(serial trainer, actor processes and threads, ``mtrl eval``, the final greedy eval, validation
and the conformance suite) — wraps any batch env whose observation space has a string part in
:class:`TextObsBatchEnv`. Its ``single_observation_space`` has each such part replaced by a
:class:`~mtrl.token_space.TokenSpace` and its observations carry ``int32 [N, max_length]``
token ids instead of strings (vocabulary in :mod:`mtrl.token_space`).

Tokenising is deterministic (a pure function of the string and the space) and cheap on the hot
path: :class:`Tokenizer` keeps an LRU cache of recent strings — missions repeat across steps
and episodes, so most steps are dictionary look-ups — and converts the strings it has not seen
in one vectorised numpy pass over the batch.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mtrl.plugins.batch_env import AsyncBatchEnv, BatchEnv, Obs, StepBatch
from mtrl.token_space import PAD_ID, TokenSpace, has_text, is_string_space, tokenised_space

__all__ = ["TextObsBatchEnv", "Tokenizer", "tokenise_text_observations"]

DEFAULT_CACHE_SIZE = 1024
"""Strings remembered per Text part; a task's distinct missions usually number far fewer."""


class Tokenizer:
    """Strings → token ids ``int32 [N, max_length]`` for one :class:`TokenSpace`.

    Characters map to ``1 .. len(charset)`` in charset order, others to ``space.unknown_id``;
    strings longer than ``max_length`` are truncated, shorter ones padded with ``0``. The last
    ``cache_size`` distinct strings are cached (least recently used evicted); ``hits`` and
    ``misses`` count look-ups.
    """

    def __init__(self, space: TokenSpace, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.space = space
        self.cache_size = cache_size
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        codes = np.array([ord(c) for c in space.charset], dtype=np.int64)
        # Code point → id table, sized by the largest code point of the charset (128 entries
        # for ASCII); a code point past its end is unknown.
        self._lut = np.full(int(codes.max()) + 1, space.unknown_id, dtype=np.int32)
        self._lut[codes] = np.arange(1, len(codes) + 1, dtype=np.int32)

    def encode(self, strings: Sequence[str]) -> np.ndarray:
        """Token ids of ``strings`` without the cache, in one vectorised pass."""
        n, length = len(strings), self.space.max_length
        out = np.full((n, length), PAD_ID, dtype=np.int32)
        if n == 0:
            return out
        cut = []
        for s in strings:
            if not isinstance(s, str):
                raise TypeError(
                    f"a Text observation must be a str, got {type(s).__name__} {s!r:.60}"
                )
            cut.append(s[:length])
        lengths = np.fromiter(map(len, cut), dtype=np.int64, count=n)
        codes = np.frombuffer("".join(cut).encode("utf-32-le"), dtype=np.uint32)
        known = codes < len(self._lut)
        ids = np.full(codes.shape, self.space.unknown_id, dtype=np.int32)
        ids[known] = self._lut[codes[known]]
        out[np.arange(length) < lengths[:, None]] = ids  # row-major = concatenation order
        return out

    def __call__(self, strings: Sequence[str]) -> np.ndarray:
        """Token ids ``int32 [len(strings), max_length]`` (a fresh array; the cache is
        never exposed)."""
        n = len(strings)
        if self.cache_size == 0:
            self.misses += n
            return self.encode(strings)
        out = np.empty((n, self.space.max_length), dtype=np.int32)
        cache = self._cache
        missed: dict[str, list[int]] = {}  # each new string encoded once, however often it comes
        for i, s in enumerate(strings):
            row = cache.get(s)
            if row is None:
                missed.setdefault(s, []).append(i)
            else:
                cache.move_to_end(s)
                out[i] = row
        if missed:
            new = list(missed)
            rows = self.encode(new)
            rows.flags.writeable = False  # cached rows are shared; ``out`` holds copies
            for s, row in zip(new, rows, strict=True):
                out[missed[s]] = row
                cache[s] = row
                if len(cache) > self.cache_size:
                    cache.popitem(last=False)
        misses = sum(map(len, missed.values()))
        self.misses += misses
        self.hits += n - misses
        return out


def _converter(space: gym.Space, cache_size: int) -> Callable[[Any], Any]:
    """A function that tokenises the Text parts of a batched observation of ``space``."""
    if is_string_space(space):
        return Tokenizer(TokenSpace.from_space(space), cache_size)
    if isinstance(space, spaces.Dict) and has_text(space):
        parts = {k: _converter(s, cache_size) for k, s in space.spaces.items()}
        return lambda obs: {k: parts[k](v) if k in parts else v for k, v in obs.items()}
    if isinstance(space, spaces.Tuple) and has_text(space):
        elems = [_converter(s, cache_size) for s in space.spaces]
        return lambda obs: tuple(f(v) for f, v in zip(elems, obs, strict=True))
    return lambda obs: obs


class TextObsBatchEnv(BatchEnv):
    """A batch env whose Text observation parts arrive as token ids (module docstring)."""

    def __init__(self, env: BatchEnv, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = tokenised_space(env.single_observation_space)
        self.single_action_space = env.single_action_space
        self.tokenise: Callable[[Obs], Obs] = _converter(env.single_observation_space, cache_size)

    def reset(self) -> Obs:
        return self.tokenise(self.env.reset())

    def step(self, actions: Any) -> StepBatch:
        out = self.env.step(actions)
        return dataclasses.replace(out, obs=self.tokenise(out.obs))

    def close(self) -> None:
        self.env.close()


class AsyncTextObsBatchEnv(TextObsBatchEnv, AsyncBatchEnv):
    """:class:`TextObsBatchEnv` over an :class:`AsyncBatchEnv`: ``recv`` tokenises too."""

    env: AsyncBatchEnv

    def __init__(self, env: AsyncBatchEnv, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        super().__init__(env, cache_size)
        self.batch_size = env.batch_size

    def async_reset(self) -> None:
        self.env.async_reset()

    def send(self, actions: Any, env_ids: np.ndarray) -> None:
        self.env.send(actions, env_ids)

    def recv(self) -> tuple[np.ndarray, StepBatch]:
        ids, out = self.env.recv()
        return ids, dataclasses.replace(out, obs=self.tokenise(out.obs))


def tokenise_text_observations(env: BatchEnv, cache_size: int = DEFAULT_CACHE_SIZE) -> BatchEnv:
    """``env`` with its Text observation parts tokenised; ``env`` itself when it has none."""
    if not has_text(env.single_observation_space):
        return env
    if isinstance(env, AsyncBatchEnv):
        return AsyncTextObsBatchEnv(env, cache_size)
    return TextObsBatchEnv(env, cache_size)
