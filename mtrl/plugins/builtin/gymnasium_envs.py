"""Built-in plugin: every registered gymnasium env, batched with gymnasium's own vectorisation.

Envs with a native vector implementation (CartPole's numpy-batched ``CartPoleVectorEnv``, ALE's
threaded ``AtariVectorEnv`` with standard 84x84x4 preprocessing) use it; the rest run N copies in
one process with ``SyncVectorEnv``. ALE Atari games appear as ``gymnasium/ALE/<Game>-v5`` when
``ale-py`` is installed. Legacy ids (Atari ``-v0``/``-v4``, MuJoCo ``-v2``/``-v3`` that need
mujoco-py, the Gym v21/v26 compatibility shims) are not offered.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mtrl.plugins import hookimpl
from mtrl.plugins.adapters import GymVectorBatchEnv
from mtrl.plugins.batch_env import BatchEnv
from mtrl.plugins.builtin.atari_spaces import atari_spaces
from mtrl.plugins.builtin.mujoco_warnings import route_mujoco_warnings
from mtrl.plugins.builtin.scores import CLASSIC_RANDOM_SOLVED, atari_scores

_DETERMINISTIC_DYNAMICS = (
    "gymnasium.envs.classic_control",
    "gymnasium.envs.mujoco",
    "gymnasium.envs.box2d",
)


def make_gymnasium(
    num_envs: int, seed: int = 0, *, gym_id: str, vectorization: str = "auto", **kwargs: Any
) -> BatchEnv:
    """Build ``num_envs`` copies of gymnasium env ``gym_id``.

    ``vectorization``: ``"auto"`` (native vector env when there is one, else sync), ``"native"``,
    ``"sync"`` or ``"async"`` (a process per copy: slower on few cores, for envs that hold the
    GIL for long). Other kwargs go to the env constructor.
    """
    import gymnasium as gym

    spec = gym.spec(gym_id)
    if vectorization == "auto":
        vectorization = "native" if spec.vector_entry_point else "sync"
    if vectorization not in ("native", "sync", "async"):
        raise ValueError(
            f"vectorization must be auto, native, sync or async, not {vectorization!r}"
        )
    mode = "vector_entry_point" if vectorization == "native" else vectorization
    if isinstance(spec.entry_point, str) and spec.entry_point.startswith("gymnasium.envs.mujoco"):
        route_mujoco_warnings()  # else MuJoCo prints them and writes MUJOCO_LOG.TXT in the cwd
    vec = gym.make_vec(gym_id, num_envs=num_envs, vectorization_mode=mode, **kwargs)
    return GymVectorBatchEnv(vec, seed=seed)


def _offered(gym_id: str, entry: str) -> bool:
    """False for ids mtrl does not offer.

    Legacy un-namespaced Atari ids; ids whose entry point is a function that only raises
    (MuJoCo -v2/-v3 need mujoco-py, the Gym v21/v26 shims need shimmy); JAX-based
    ``phys2d``/``tabular`` envs, which return JAX arrays.
    """
    if not entry:
        return False
    if entry.startswith("ale_py") and not gym_id.startswith("ALE/"):
        return False
    return not entry.startswith(("gymnasium.envs.phys2d", "gymnasium.envs.tabular"))


@hookimpl
def mtrl_register_envs(register: Any) -> None:
    """Offer each non-legacy gymnasium id (ALE games too when ale-py is installed)."""
    import gymnasium as gym

    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:
        pass
    for gym_id, spec in sorted(gym.registry.items()):
        entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
        if not _offered(gym_id, entry):
            continue
        random_score = reference_score = observation_space = action_space = None
        if gym_id.startswith("ALE/"):
            game = gym_id[4:].rsplit("-v", 1)[0]
            random_score, reference_score = atari_scores(game)
            observation_space, action_space = atari_spaces(game)  # no ROM loaded
        elif gym_id in CLASSIC_RANDOM_SOLVED:
            random_score, reference_score = CLASSIC_RANDOM_SOLVED[gym_id]
        register.env(
            gym_id,
            partial(make_gymnasium, gym_id=gym_id),
            observation_space=observation_space,
            action_space=action_space,
            description=f"gymnasium {gym_id} ({entry})",
            stochastic=False if entry.startswith(_DETERMINISTIC_DYNAMICS) else None,
            random_score=random_score,
            reference_score=reference_score,
            max_episode_steps=spec.max_episode_steps,
        )
