"""`mtrl envs`: quiet and fast listing (declared spaces, library warnings kept as notes, no
MUJOCO_LOG.TXT left behind), descriptions and scores on request; the declared Atari and tensor
spaces equal those of the envs the backends build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mtrl.plugins import get_plugins
from mtrl.plugins.builtin.atari_spaces import ATARI_MINIMAL_ACTIONS, atari_spaces
from mtrl.plugins.builtin.mujoco_warnings import MujocoWarning

MTRL = [sys.executable, "-c", "import sys; from mtrl.cli import main; sys.exit(main())"]


def _mtrl(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MTRL, *args], cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )


def test_listing_every_env_is_quiet_and_leaves_no_mujoco_log(tmp_path: Path) -> None:
    res = _mtrl(tmp_path, "envs")
    assert res.returncode == 0, res.stderr
    assert "gymnasium/HalfCheetah-v5" in res.stdout and "envpool/Pong-v5" in res.stdout
    assert [line for line in res.stderr.splitlines() if line.strip()] == []
    assert list(tmp_path.iterdir()) == []  # MuJoCo wrote no MUJOCO_LOG.TXT here
    assert "--long adds each env's description" in res.stdout


def _rows(cwd: Path, *args: str) -> dict[str, dict[str, Any]]:
    res = _mtrl(cwd, "envs", "--json", *args)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return {r["id"]: r for r in json.loads(res.stdout)}


def test_long_view_shows_what_plugins_registered_and_warnings_as_notes(tmp_path: Path) -> None:
    rows = _rows(tmp_path, "--long")
    pong = rows["envpool/Pong-v5"]
    assert pong["description"] == "envpool Pong-v5 (atari)"
    assert (pong["random_score"], pong["reference_score"]) == (-20.7, 14.6)
    assert (pong["observation"], pong["action"]) == ("uint8[4,84,84] in [0, 255]", "Discrete(6)")
    assert rows["gymnasium/CartPole-v1"]["reference_score"] == 475.0
    cheetah = rows["gymnasium/HalfCheetah-v5"]
    assert cheetah["max_episode_steps"] == 1000 and cheetah["stochastic"] is False
    # A library's warnings at build time are kept as the env's notes (MuJoCo's own go the same
    # way: test_mujoco_warnings_become_python_warnings_not_a_log_file).
    assert any("Ant-v4 is out of date" in n for n in rows["gymnasium/Ant-v4"]["notes"])
    assert "notes" not in pong
    assert list(tmp_path.iterdir()) == []
    short = _rows(tmp_path, "--match", "CartPole-v1", "--plugin", "tensor")
    assert set(short["tensor/CartPole-v1"]) == {"id", "plugin", "observation", "action"}
    res = _mtrl(tmp_path, "envs", "-l", "--match", "ALE/Pong-v5")
    assert "-20.7 → 14.6" in res.stdout and "ale_py.env:AtariEnv" in res.stdout


def test_atari_and_tensor_spaces_are_declared_so_listing_builds_none() -> None:
    plugins = get_plugins()
    atari = [s for s in plugins.envs if "/ALE/" in s.id or s.description.endswith("(atari)")]
    assert len(atari) > 200
    lazy = [s.id for s in atari if s._observation_space is None or s._action_space is None]
    assert lazy == [], f"add these games to atari_spaces.ATARI_MINIMAL_ACTIONS: {lazy}"
    tensor = plugins.envs.ids("tensor")
    assert tensor and all(plugins.envs.get(i)._action_space is not None for i in tensor)


@pytest.mark.parametrize("game", ["Pong", "Breakout", "MontezumaRevenge", "TicTacToe3D"])
def test_declared_atari_spaces_match_both_backends(game: str) -> None:
    import ale_py
    import envpool

    from mtrl.plugins.builtin.gymnasium_envs import make_gymnasium

    observation, action = atari_spaces(game)
    env = make_gymnasium(1, gym_id=f"ALE/{game}-v5")
    try:
        assert (env.single_observation_space, env.single_action_space) == (observation, action)
    finally:
        env.close()
    task = f"{game[:-1]}d" if game == "TicTacToe3D" else game  # envpool spells it TicTacToe3d
    spec = envpool.make_spec(f"{task}-v5")
    assert spec.gymnasium_observation_space == observation
    assert spec.gymnasium_action_space == action
    rom = ale_py.ALEInterface()
    rom.setLoggerMode(ale_py.LoggerMode.Error)
    rom.loadROM(ale_py.roms.get_rom_path(_rom_id(game)))
    assert len(rom.getMinimalActionSet()) == ATARI_MINIMAL_ACTIONS[game.lower()]


def _rom_id(game: str) -> str:
    """``MontezumaRevenge`` -> ``montezuma_revenge``, as ale-py names its ROMs."""
    import ale_py

    (rom,) = [r for r in ale_py.roms.get_all_rom_ids() if r.replace("_", "") == game.lower()]
    return rom


def test_declared_tensor_spaces_are_the_built_envs() -> None:
    plugins = get_plugins()
    for env_id in plugins.envs.ids("tensor"):
        spec = plugins.envs.get(env_id)
        declared = spec.observation_space, spec.action_space
        env = spec.build(num_envs=2, seed=0)
        try:
            assert (env.single_observation_space, env.single_action_space) == declared, env_id
        finally:
            env.close()


UNSTABLE = """
<mujoco><worldbody><body><joint type="slide" axis="1 0 0"/><geom size="0.1"/></body>
</worldbody></mujoco>
"""


def test_mujoco_warnings_become_python_warnings_not_a_log_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a MuJoCo env installs the handler; a warning MuJoCo's C library raises after
    that (here: a simulation blowing up, which every MuJoCo version reports) is a Python
    warning, and no MUJOCO_LOG.TXT is written."""
    import mujoco

    monkeypatch.chdir(tmp_path)
    spec = get_plugins().envs.get("gymnasium/HalfCheetah-v5")
    env = spec.build(num_envs=1, seed=0)
    env.close()
    model = mujoco.MjModel.from_xml_string(UNSTABLE)
    data = mujoco.MjData(model)
    data.qvel[0] = float("nan")
    with pytest.warns(MujocoWarning, match=r"MuJoCo: .*(QVEL|QACC|unstable)"):
        mujoco.mj_step(model, data)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
