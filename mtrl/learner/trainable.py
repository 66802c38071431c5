"""Whether the learner can train on a task's spaces: the one check that ``mtrl train``,
``mtrl validate --check-envs`` and the env conformance suite share.

:func:`check_trainable` builds the task's encoder and policy head with the very code
:class:`~mtrl.learner.model.MultiTaskModel` uses, then runs them once on a small batch sampled
from the observation space. A space the learner cannot handle thus fails before a run, with an
:class:`~mtrl.learner.encoders.UnsupportedSpaceError` naming the part of the space
(``obs['graph']``, ``obs[1]``, ``obs['action_mask']``, ``action``) instead of a traceback that
names only "task 0".

Text parts, alone or inside a Dict or Tuple, are accepted: the env boundary tokenises them
(:mod:`mtrl.plugins.text`), so a raw ``Text`` space is checked as the
:class:`~mtrl.token_space.TokenSpace` the learner will actually see.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from mtrl.config.learner import ModelConfig
from mtrl.learner.encoders import ACTION_MASK_KEY, UnsupportedSpaceError
from mtrl.learner.model import MultiTaskModel, TaskSpaces, obs_to_tensor
from mtrl.token_space import tokenised_space

__all__ = ["SUPPORTED_ACTION_SPACES", "UnsupportedSpaceError", "check_trainable"]

SUPPORTED_ACTION_SPACES = "Discrete, MultiDiscrete, Box"
"""What the policy heads (:func:`mtrl.learner.distributions.make_policy_head`) can act in."""

_MASK_PATH = f"obs[{ACTION_MASK_KEY!r}]"
_SAMPLES = 2


def _has_mask(space: gym.Space) -> bool:
    return isinstance(space, spaces.Dict) and ACTION_MASK_KEY in space.spaces


def _build(observation_space: gym.Space, action_space: gym.Space, cfg: ModelConfig) -> Any:
    try:
        return MultiTaskModel([TaskSpaces(observation_space, action_space)], cfg)
    except UnsupportedSpaceError as e:  # from an encoder: it names the part already
        raise UnsupportedSpaceError(e.path, e.reason) from None
    except TypeError:  # make_policy_head: no head for this action space
        raise UnsupportedSpaceError(
            "action",
            f"{type(action_space).__name__} action spaces are not supported ({action_space}); "
            f"supported: {SUPPORTED_ACTION_SPACES}",
        ) from None
    except ValueError as e:
        if _has_mask(observation_space):  # a mask beside non-discrete actions
            raise UnsupportedSpaceError(
                _MASK_PATH,
                f"an action mask needs Discrete or MultiDiscrete actions, not {action_space}; "
                "rename the key or drop it",
            ) from None
        raise UnsupportedSpaceError("obs", f"{type(e).__name__}: {e}") from None


def _sample(space: gym.Space, n: int, seed: int) -> Any:
    """``n`` observations of ``space`` as one batch (Tuple as tuple, Dict as dict); every
    action legal in an ``action_mask``."""
    if isinstance(space, spaces.Dict):
        return {
            k: np.ones((n, *s.shape), s.dtype) if k == ACTION_MASK_KEY else _sample(s, n, seed + i)
            for i, (k, s) in enumerate(space.spaces.items())
        }
    if isinstance(space, spaces.Tuple):
        return tuple(_sample(s, n, seed + i) for i, s in enumerate(space.spaces))
    own = copy.deepcopy(space)  # seeding must not touch the caller's space
    own.seed(seed)
    return np.stack([np.asarray(own.sample(), dtype=space.dtype) for _ in range(n)])


def check_trainable(
    observation_space: gym.Space, action_space: gym.Space, cfg: ModelConfig | None = None
) -> None:
    """Raise :class:`UnsupportedSpaceError` unless the learner can train on these spaces.

    ``cfg`` is the model config of the run (the default model when None): the image encoder
    depends on it only through widths, so the answer rarely changes with it. The error's
    ``path`` names the offending part and its ``reason`` lists what is supported.
    """
    with torch.random.fork_rng(devices=[]):  # a seeded run's own model init stays as it was
        _build_and_run(observation_space, action_space, cfg)


def _build_and_run(
    observation_space: gym.Space, action_space: gym.Space, cfg: ModelConfig | None
) -> None:
    observation_space = tokenised_space(observation_space)  # as the env boundary delivers it
    model = _build(observation_space, action_space, cfg if cfg is not None else ModelConfig())
    obs = obs_to_tensor(_sample(observation_space, _SAMPLES, seed=0))
    try:
        with torch.no_grad():
            model(0, obs)
    except Exception as e:  # the same code the learner would run, failing on valid samples
        msg = f"{type(e).__name__}: {e}".splitlines()[0]
        path = _MASK_PATH if ACTION_MASK_KEY in msg and _has_mask(observation_space) else "obs"
        raise UnsupportedSpaceError(path, f"the model fails on sampled observations: {msg}") from e
