"""The public plugin contract: every hook mtrl calls, with its documented semantics.

A plugin is a module (or object) with functions decorated by :data:`hookimpl` whose names and
argument names match the specs below. Third-party packages expose it through the entry-point
group ``mtrl`` in their ``pyproject.toml``::

    [project.entry-points.mtrl]
    myplugin = "my_package.mtrl_plugin"

The entry-point name (``myplugin``) is the plugin's name and the namespace of its env ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from mtrl.plugins.registrar import EnvRegistrar

PROJECT = "mtrl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def mtrl_register_envs(register: EnvRegistrar) -> None:
    """Offer environments by calling ``register.env(name, make, ...)`` once per environment.

    ``name`` becomes the id ``"<plugin>/<name>"``. ``make(num_envs, seed, **env_kwargs)`` must
    return an :class:`mtrl.plugins.BatchEnv` of ``num_envs`` copies seeded from ``seed`` that
    follows the batch-env contract (next-step auto-reset, terminated and truncated apart); the
    conformance suite ``mtrl.testing.check_env`` verifies it. Keyword arguments of ``env`` give
    the spaces (else found lazily by building one copy) and metadata: ``description``,
    ``stochastic``, ``step_cost_s``, ``random_score``, ``reference_score``,
    ``max_episode_steps``.

    Registration must be cheap: import heavy simulators inside ``make``, not at module import,
    because every process (including spawned actor workers) loads every plugin. Raise
    :class:`mtrl.errors.PluginUnavailable` when an optional dependency is missing; the plugin
    is then listed as unavailable with your message. Return nothing: a returned value is
    reported as a contract violation.
    """
