"""Built-in plugin ``memory``: tasks only an agent with memory solves (``learner.model.core``).

``memory/CueRecall-v0``: a cue shown at the first step must be named at the last, ``delay``
blank steps later (env_kwargs ``delay``, default 4): return 1 with memory, 0 in expectation
without (:mod:`mtrl.plugins.builtin.tensor_envs.cue_recall`). Tensor-native, so it also runs
as an Anakin task. Registering it imports no torch.
"""

from __future__ import annotations

from typing import Any

from mtrl.plugins import hookimpl
from mtrl.plugins.batch_env import BatchEnv
from mtrl.plugins.builtin.tensor_envs.spaces import cue_recall_spaces


class _MakeCueRecall:
    """``make(num_envs, seed, **env_kwargs)``; picklable for spawned actor workers."""

    def __call__(self, num_envs: int, seed: int = 0, **env_kwargs: Any) -> BatchEnv:
        from mtrl.plugins.builtin.tensor_envs.cue_recall import CueRecall

        return CueRecall(num_envs, seed, **env_kwargs)

    def __repr__(self) -> str:
        return "memory_envs.make[CueRecall-v0]"


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer ``CueRecall-v0`` (spaces declared; building one imports torch)."""
    observation_space, action_space = cue_recall_spaces()
    register.env(
        "CueRecall-v0",
        _MakeCueRecall(),
        observation_space=observation_space,
        action_space=action_space,
        description="name the cue shown `delay` steps ago (+1/-1): needs a recurrent core",
        stochastic=True,
        random_score=0.0,
        reference_score=1.0,
    )
