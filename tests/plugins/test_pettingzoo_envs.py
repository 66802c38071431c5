"""The pettingzoo built-in: agent slots of parallel games, board games vs a random opponent."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from mtrl.plugins import get_plugins, load_plugins, make_env
from mtrl.plugins.builtin.pettingzoo_envs import BOARD, PARALLEL
from mtrl.plugins.spaces import random_actions
from mtrl.testing import check_env

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")


def _masked_random(obs: dict, rng: np.random.Generator) -> np.ndarray:
    """One legal move per game, uniformly among the action mask's ones (0 after a game ended:
    a final observation may have no legal move, and the reset step ignores the action)."""
    legal = [np.flatnonzero(m) for m in obs["action_mask"]]
    return np.array([rng.choice(moves) if len(moves) else 0 for moves in legal])


def test_registers_homogeneous_games_only() -> None:
    info = get_plugins().infos["pettingzoo"]
    assert info.status == "ok", info.errors
    ids = set(info.envs)
    assert {
        "pettingzoo/classic/rps_v2",
        "pettingzoo/classic/tictactoe_v3",
        "pettingzoo/classic/connect_four_v3",
        "pettingzoo/mpe/simple_spread_v3",
        "pettingzoo/mpe/simple_spread_v3_continuous",
        "pettingzoo/butterfly/knights_archers_zombies_v11",
    } <= ids
    assert not any("simple_tag" in i or "simple_adversary" in i for i in ids)


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_declared_parallel_spaces_match_the_games(name: str) -> None:
    game = PARALLEL[name]
    probe = importlib.import_module(game.module).parallel_env(**game.kwargs)
    num = len(probe.possible_agents)
    probe.close()
    spec = get_plugins().envs.get(f"pettingzoo/{name}")
    with spec.build(num_envs=num, seed=0) as env:
        assert env.single_observation_space == spec.observation_space
        assert env.single_action_space == spec.action_space
        obs = env.reset()
        out = env.step(random_actions(env.single_action_space, num, np.random.default_rng(0)))
        assert out.reward.shape == (num,) and len(obs) == len(out.obs) == num


@pytest.mark.parametrize("name", sorted(BOARD))
def test_board_games_play_legal_games(name: str) -> None:
    rng = np.random.default_rng(0)
    with make_env(f"pettingzoo/{name}", 2, seed=1) as env:
        obs = env.reset()
        assert set(obs) == {"observation", "action_mask"}
        for _ in range(8):
            out = env.step(_masked_random(obs, rng))
            obs = out.obs
            assert np.isfinite(out.reward).all()


@pytest.mark.parametrize(
    ("env_id", "num_envs"),
    [
        ("pettingzoo/classic/rps_v2", 4),
        ("pettingzoo/classic/tictactoe_v3", 3),
        ("pettingzoo/mpe/simple_spread_v3_continuous", 6),
        ("pettingzoo/butterfly/knights_archers_zombies_v11", 4),
    ],
)
def test_conformance(env_id: str, num_envs: int) -> None:
    report = check_env(env_id, num_envs=num_envs)
    assert {"build", "spaces", "auto-reset", "seeding", "spawn"} <= set(report.checks)


def test_rps_slots_map_to_agents_of_their_game() -> None:
    """Slots 2g, 2g+1 are game g's players: zero-sum rewards, each observes the other's move."""
    rng = np.random.default_rng(0)
    with make_env("pettingzoo/classic/rps_v2", 6, seed=0) as env:
        assert (env.reset() == 3).all()  # 3 = no move yet
        for t in range(15):
            actions = rng.integers(0, 3, size=6)
            out = env.step(actions)
            np.testing.assert_array_equal(out.reward.reshape(3, 2).sum(axis=1), 0)
            np.testing.assert_array_equal(out.obs.reshape(3, 2), actions.reshape(3, 2)[:, ::-1])
            assert not out.terminated.any()
            assert out.truncated.all() == (t == 14)  # max_cycles=15: every slot cut together
        out = env.step(rng.integers(0, 3, size=6))  # the reset step
        assert (out.obs == 3).all() and (out.reward == 0).all()
        assert not (out.terminated | out.truncated).any()


def test_an_agent_leaving_ends_its_game_for_every_slot() -> None:
    """knights_archers_zombies: the first death terminates that slot and truncates the others."""
    rng = np.random.default_rng(0)
    partial_ends = 0
    with make_env("pettingzoo/butterfly/knights_archers_zombies_v11", 8, seed=0) as env:
        env.reset()
        prev_done = np.zeros(8, dtype=bool)
        for _ in range(500):
            out = env.step(rng.integers(0, 6, size=8))
            done = (out.terminated | out.truncated).reshape(2, 4)
            assert (done.all(axis=1) | ~done.any(axis=1)).all()  # all slots of a game, or none
            assert not (out.terminated & out.truncated).any()
            assert (out.reward[prev_done] == 0).all() and not done.reshape(8)[prev_done].any()
            term = out.terminated.reshape(2, 4)
            partial_ends += int((term.any(axis=1) & ~term.all(axis=1)).sum())
            prev_done = done.reshape(8)
    assert partial_ends  # some game ended because one agent died while others lived


def test_game_g_is_seeded_with_seed_plus_g() -> None:
    with (
        make_env("pettingzoo/mpe/simple_spread_v3", 6, seed=5) as two_games,
        make_env("pettingzoo/mpe/simple_spread_v3", 3, seed=6) as one_game,
    ):
        np.testing.assert_array_equal(two_games.reset()[3:], one_game.reset())


def test_num_envs_must_be_a_multiple_of_the_agents() -> None:
    with pytest.raises(ValueError, match=r"pettingzoo/mpe/simple_spread_v3: .*multiple of 3"):
        make_env("pettingzoo/mpe/simple_spread_v3", 4)


def test_bad_kwargs_name_the_env() -> None:
    with pytest.raises(Exception, match="pettingzoo/classic/rps_v2"):
        make_env("pettingzoo/classic/rps_v2", 2, bogus=1)
    with pytest.raises(ValueError, match="pettingzoo/classic/tictactoe_v3: opponent"):
        make_env("pettingzoo/classic/tictactoe_v3", 1, opponent="minimax")


@pytest.mark.parametrize(("seat", "marks"), [(0, 0), (1, 1)])
def test_tictactoe_seat_decides_who_moves_first(seat: int, marks: int) -> None:
    with make_env("pettingzoo/classic/tictactoe_v3", 4, seed=0, seat=seat) as env:
        board = env.reset()["observation"]  # planes: (mine, opponent's)
        assert (board[..., 0].sum(axis=(1, 2)) == 0).all()
        assert (board[..., 1].sum(axis=(1, 2)) == marks).all()


def test_tictactoe_illegal_move_loses() -> None:
    with make_env("pettingzoo/classic/tictactoe_v3", 1, seed=0, seat=0) as env:
        env.reset()
        out = env.step(np.array([4]))
        taken = int(np.flatnonzero(out.obs["action_mask"][0] == 0)[-1])  # the opponent's square
        out = env.step(np.array([taken]))
        assert out.terminated[0] and not out.truncated[0] and out.reward[0] == -1
        out = env.step(np.array([0]))  # reset step
        assert out.reward[0] == 0 and not out.terminated[0]
        assert out.obs["action_mask"][0].all()


def test_tictactoe_random_vs_random_is_even_over_both_seats() -> None:
    def play(seat: int | None, games: int = 200) -> tuple[int, int]:
        rng = np.random.default_rng(1)
        wins = losses = 0
        with make_env("pettingzoo/classic/tictactoe_v3", 20, seed=7, seat=seat) as env:
            obs = env.reset()
            while wins + losses < games:
                out = env.step(_masked_random(obs, rng))
                obs = out.obs
                assert not out.truncated.any()
                wins += int((out.reward > 0).sum())
                losses += int((out.reward < 0).sum())
        return wins, losses

    wins, losses = play(None)
    assert abs(wins - losses) < 40, (wins, losses)  # ~3 sd of the win-loss difference
    first_wins, first_losses = play(0)
    assert first_wins > 1.5 * first_losses  # moving first wins ~58%, loses ~29%
    second_wins, second_losses = play(1)
    assert second_losses > 1.5 * second_wins


def test_missing_pettingzoo_makes_the_plugin_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    info = load_plugins(autoload=False).infos["pettingzoo"]
    assert info.status == "unavailable"
    assert "pip install 'pettingzoo[classic,butterfly]' mpe2" in info.errors[0]
