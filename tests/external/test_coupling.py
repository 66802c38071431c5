"""An external simulation behind the BatchEnv contract: Python and C clients, both modes."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from mtrl.plugins.external import ExternalSim
from tests.external.conftest import HERE, PY_SIM


def _run(env, steps: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = [env.reset()]
    for _ in range(steps):
        b = env.step(rng.uniform(-1, 1, (env.num_envs, 1)).astype(np.float32))
        out += [b.obs, b.reward, b.terminated, b.truncated]
    return out


def test_spaces_come_from_the_handshake_and_the_env_owns_reset_and_time_limit() -> None:
    with ExternalSim(command=PY_SIM)(num_envs=3, seed=0) as env:
        assert env.single_observation_space.shape == (2,)
        assert env.single_action_space.shape == (1,) and env.max_episode_steps == 20
        obs = env.reset()
        assert obs.shape == (3, 2) and obs.dtype == np.float32
        np.testing.assert_allclose(obs[:, 0], [-1, -2 / 3, -1 / 3], rtol=1e-6)
        for t in range(1, 21):
            b = env.step(np.ones((3, 1), np.float32))
            assert b.truncated.all() == (t == 20) and not b.terminated.any()
        np.testing.assert_allclose(b.obs[:, 0], obs[:, 0] + 2.0, rtol=1e-5)
        b = env.step(np.full((3, 1), 0.5, np.float32))  # next-step auto-reset
        np.testing.assert_allclose(b.obs, obs)
        assert (b.reward == 0).all() and not (b.truncated | b.terminated).any()


def test_per_copy_processes_match_one_batch_process() -> None:
    batch = ExternalSim(command=PY_SIM)(num_envs=3, seed=4)
    split = ExternalSim(command=PY_SIM, copies_per_process=2)(num_envs=3, seed=4)
    try:
        assert len(split.pids()) == 2
        for a, b in zip(_run(batch, 45), _run(split, 45), strict=True):
            np.testing.assert_array_equal(a, b)
    finally:
        batch.close()
        split.close()


def test_the_c_client_gives_the_same_batches_as_the_python_client(c_drift_sim) -> None:
    py = ExternalSim(command=PY_SIM)(num_envs=4, seed=3)
    c = ExternalSim(command=f"{c_drift_sim} {{address}}")(num_envs=4, seed=3)
    try:
        for a, b in zip(_run(py, 50), _run(c, 50), strict=True):
            np.testing.assert_array_equal(a, b)
    finally:
        py.close()
        c.close()


def test_attach_to_a_running_simulation_over_tcp() -> None:
    port = 20000 + uuid.uuid4().int % 20000
    address = f"tcp://127.0.0.1:{port}"
    sim = subprocess.Popen([sys.executable, str(HERE / "drift_sim.py"), address, "--bind"])
    try:
        env = ExternalSim(address=address, start_timeout_s=20)(num_envs=2, seed=0)
        out = _run(env, 5)
        env.close()
        assert out[0].shape == (2, 2)
        assert sim.wait(timeout=10) == 0, "CLOSE ends the simulation"
    finally:
        if sim.poll() is None:
            sim.kill()


def test_env_kwargs_fill_the_command_template_and_unknown_ones_are_rejected() -> None:
    sim = ExternalSim(command=PY_SIM + " --children {kids}", defaults={"kids": 0})
    with pytest.raises(TypeError, match=r"unexpected env_kwargs \['kid'\]"):
        sim(num_envs=1, seed=0, kid=1)
    bad = ExternalSim(command=PY_SIM + " {nope}")
    with pytest.raises(TypeError, match=r"\{nope\}"):
        bad(num_envs=1, seed=0)
    t0 = time.monotonic()
    with sim(num_envs=1, seed=0, kids=1) as env:
        env.reset()
    assert time.monotonic() - t0 < 20
