"""EnvSpec: what a plugin tells mtrl about one environment, and the registry of all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from mtrl.errors import EnvKwargsError, PluginError, UnknownEnvError
from mtrl.names import unknown_env_message
from mtrl.plugins.batch_env import BatchEnv
from mtrl.plugins.text import tokenise_text_observations
from mtrl.token_space import tokenised_space

#: ``make(num_envs, seed, **env_kwargs) -> BatchEnv``
BatchEnvFactory = Callable[..., BatchEnv]


@dataclass
class EnvSpec:
    """One environment offered by a plugin.

    ``id`` is ``"<plugin>/<name>"``. Spaces are those of a *single* copy as the batch env
    produced by ``make`` sees it (after any preprocessing the backend applies). When a plugin
    does not give them up front they are found lazily by building a one-copy batch env. Text
    observation parts are tokenised here, for every env kind (:mod:`mtrl.plugins.text`): a
    declared Text part reads as its :class:`~mtrl.token_space.TokenSpace`, and :meth:`build`
    returns an env whose observations carry token ids.

    Metadata the rest of the system uses: ``stochastic`` (are dynamics random given the seed's
    stream — schedulers treat step time and returns as noisy), ``step_cost_s`` (expected seconds
    per single-env step, if known), ``random_score``/``reference_score`` (for normalised scores:
    ``(score - random) / (reference - random)``), ``max_episode_steps``, ``num_envs_multiple``
    (``num_envs`` must be a multiple of it: the agent slots of one multi-agent game, each game
    filling that many copies; 1 for single-agent envs).

    A ``make`` with a ``for_env(id, observation_space, action_space)`` method (an external
    simulation, :class:`~mtrl.plugins.external.ExternalSim`) is replaced by what that returns:
    a factory that names its env id in errors and refuses an env whose spaces differ from the
    declared ones.
    """

    id: str
    make: BatchEnvFactory
    plugin: str
    description: str = ""
    stochastic: bool | None = None
    step_cost_s: float | None = None
    random_score: float | None = None
    reference_score: float | None = None
    max_episode_steps: int | None = None
    num_envs_multiple: int = 1
    _observation_space: gym.Space | None = field(default=None, repr=False)
    _action_space: gym.Space | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._observation_space is not None:  # what build() will return, Text tokenised
            self._observation_space = tokenised_space(self._observation_space)
        bind = getattr(self.make, "for_env", None)
        if callable(bind):  # a factory that names its env and checks the declared spaces
            self.make = bind(self.id, self._observation_space, self._action_space)

    @property
    def name(self) -> str:
        """The id without its plugin namespace."""
        return self.id.split("/", 1)[1]

    @property
    def observation_space(self) -> gym.Space:
        self._resolve_spaces()
        assert self._observation_space is not None
        return self._observation_space

    @property
    def action_space(self) -> gym.Space:
        self._resolve_spaces()
        assert self._action_space is not None
        return self._action_space

    def _resolve_spaces(self) -> None:
        if self._observation_space is not None and self._action_space is not None:
            return
        env = self.build(num_envs=self.num_envs_multiple, seed=0)
        try:
            self._observation_space = env.single_observation_space
            self._action_space = env.single_action_space
        finally:
            env.close()

    def build(self, num_envs: int, seed: int = 0, **env_kwargs: Any) -> BatchEnv:
        """Build a batch env of ``num_envs`` copies; errors name this env id. Text parts of
        the observation arrive tokenised (:func:`.text.tokenise_text_observations`)."""
        try:
            env = self.make(num_envs=num_envs, seed=seed, **env_kwargs)
        except (TypeError, ValueError) as e:  # what factories raise for arguments they refuse
            raise EnvKwargsError(
                f"{self.id}: cannot build with {env_kwargs or 'no kwargs'}: {e}"
            ) from e
        if not isinstance(env, BatchEnv):
            raise PluginError(
                f"{self.id}: plugin {self.plugin!r} returned {type(env).__name__}, "
                "not an mtrl.plugins.BatchEnv"
            )
        if env.num_envs != num_envs:
            raise PluginError(f"{self.id}: asked for {num_envs} envs, got {env.num_envs}")
        return tokenise_text_observations(env)

    def normalized_score(self, score: float) -> float | None:
        """Score on the scale random = 0, reference = 1; None when either end is unknown."""
        if self.random_score is None or self.reference_score is None:
            return None
        span = self.reference_score - self.random_score
        return (score - self.random_score) / span if span else None


class EnvRegistry:
    """Env ids of every loaded plugin, with did-you-mean lookups."""

    def __init__(self) -> None:
        self._specs: dict[str, EnvSpec] = {}

    def add(self, spec: EnvSpec) -> None:
        if spec.id in self._specs:
            other = self._specs[spec.id].plugin
            raise PluginError(f"env id {spec.id!r} is already registered by plugin {other!r}")
        self._specs[spec.id] = spec

    def remove_plugin(self, plugin: str) -> None:
        self._specs = {k: s for k, s in self._specs.items() if s.plugin != plugin}

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._specs

    def __iter__(self) -> Iterator[EnvSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def ids(self, plugin: str | None = None) -> list[str]:
        return [i for i, s in self._specs.items() if plugin is None or s.plugin == plugin]

    def get(self, env_id: str) -> EnvSpec:
        try:
            return self._specs[env_id]
        except KeyError:
            raise UnknownEnvError(unknown_env_message(env_id, self._specs)) from None
