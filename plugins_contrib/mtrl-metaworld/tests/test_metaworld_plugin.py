"""The Meta-World plugin: every task registered, the env contract held, goals drawn from the
task's fixed 50, success flags reported, and a scripted expert's episodes counted as successes
(so a success rate of 0 from an agent is the agent's, not the plumbing's)."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("mtrl_metaworld") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-metaworld is not installed: pip install -e plugins_contrib/mtrl-metaworld",
        allow_module_level=True,
    )

import numpy as np
from mtrl_metaworld.env import MetaWorldTask, goal_tasks
from mtrl_metaworld.tasks import MT10, MT50

from mtrl.plugins import get_plugins, make_env
from mtrl.testing import check_env
from mtrl.train.evaluate import run_episodes


def test_every_meta_world_task_is_registered_with_its_lists_as_meta_world_has_them() -> None:
    from metaworld.env_dict import MT10_V3, MT50_V3

    assert (tuple(MT10_V3), tuple(MT50_V3)) == (MT10, MT50)
    info = get_plugins().infos["metaworld"]
    assert info.status == "ok", info.errors
    assert sorted(info.envs) == sorted(f"metaworld/{n}" for n in MT50)
    spec = get_plugins().envs.get("metaworld/reach-v3")
    assert spec.max_episode_steps == 500 and spec.stochastic is False


@pytest.mark.parametrize(
    ("task", "kwargs"),
    [("reach-v3", {}), ("drawer-close-v3", {"one_hot": "MT10"})],
)
def test_tasks_pass_the_conformance_suite(task: str, kwargs: dict) -> None:
    check_env(
        f"metaworld/{task}",
        num_envs=2,
        steps=130,
        env_kwargs={"max_episode_steps": 60, **kwargs},
        determinism_steps=40,
    )


def test_one_hot_ids_follow_the_benchmark_order() -> None:
    env = make_env("metaworld/push-v3", 1, seed=0, one_hot="MT10")
    obs = env.reset()
    assert obs.shape == (1, 39 + 10)
    assert obs[0, 39:].tolist() == [0, 1] + [0] * 8  # push-v3 is MT10's second task
    env.close()
    env = make_env("metaworld/soccer-v3", 1, seed=0, one_hot="MT50")
    assert env.single_observation_space.shape == (39 + 50,)
    env.close()
    with pytest.raises(ValueError, match="soccer-v3 is not one of its tasks"):
        make_env("metaworld/soccer-v3", 1, seed=0, one_hot="MT10")


def test_each_reset_draws_a_goal_from_the_tasks_fixed_fifty() -> None:
    _, tasks = goal_tasks("reach-v3", 0)
    assert len(tasks) == 50
    env = MetaWorldTask("reach-v3", goals_seed=0)
    goals = set()
    for i in range(12):
        obs, _ = env.reset(seed=i if i == 0 else None)
        goals.add(tuple(np.round(obs[36:39], 5)))
    env.close()
    assert len(goals) > 5, "a new goal on (nearly) every reset"
    again = MetaWorldTask("reach-v3", goals_seed=0)
    first, _ = again.reset(seed=0)
    again.close()
    assert tuple(np.round(first[36:39], 5)) in goals, "the same seed, the same first goal"


def test_a_scripted_expert_succeeds_and_the_evaluation_counts_it() -> None:
    """Meta-World's own scripted policy for reach-v3 drives the arm to the goal: mtrl's episode
    accounting reports those episodes as successes; random actions do not succeed."""
    from metaworld.policies import SawyerReachV3Policy

    expert = SawyerReachV3Policy()

    def policy(task: int, obs: np.ndarray, valid: np.ndarray) -> tuple[None, np.ndarray, None]:
        actions = np.stack([expert.get_action(o.astype(np.float64)) for o in obs])
        return None, np.clip(actions, -1, 1).astype(np.float32), None

    env = make_env("metaworld/reach-v3", 2, seed=3, max_episode_steps=150)
    finished = run_episodes(env, policy, 0, episodes=4, max_steps=2000)
    env.close()
    assert finished.lengths == [150] * 4
    assert finished.successes == [True] * 4

    rng = np.random.default_rng(0)

    def random_policy(task: int, obs: np.ndarray, valid: np.ndarray) -> tuple:
        return None, rng.uniform(-1, 1, (len(obs), 4)).astype(np.float32), None

    env = make_env("metaworld/reach-v3", 2, seed=3, max_episode_steps=150)
    finished = run_episodes(env, random_policy, 0, episodes=4, max_steps=2000)
    env.close()
    assert len(finished.successes) == 4 and sum(finished.successes) <= 1


def test_bad_kwargs_are_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"max_episode_steps must be 1\.\.500"):
        make_env("metaworld/reach-v3", 1, seed=0, max_episode_steps=600)
    with pytest.raises(ValueError, match="one_hot must be one of"):
        make_env("metaworld/reach-v3", 1, seed=0, one_hot="MT11")
