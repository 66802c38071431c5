"""Text observations at the env boundary: the tokeniser, its cache, the token space and the
batch-env wrapper every env kind goes through (``EnvSpec.build``)."""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from mtrl.plugins import EnvSpec, batch_env_from_gymnasium
from mtrl.plugins.text import TextObsBatchEnv, Tokenizer, tokenise_text_observations
from mtrl.token_space import TokenSpace, has_text, tokenised_space


def _tok(charset: str = "cba", max_length: int = 5, cache_size: int = 8) -> Tokenizer:
    return Tokenizer(TokenSpace.from_text(spaces.Text(max_length, charset=charset)), cache_size)


def test_ids_follow_the_charset_order_with_padding_after() -> None:
    out = _tok("cba")(["abc", "c", ""])
    assert out.dtype == np.int32 and out.shape == (3, 5)
    np.testing.assert_array_equal(out, [[3, 2, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]])


def test_a_set_charset_is_sorted_so_every_process_agrees() -> None:
    space = TokenSpace.from_text(spaces.Text(4, charset=frozenset("zya")))
    assert space.charset == "ayz"
    np.testing.assert_array_equal(Tokenizer(space)(["zya"]), [[3, 2, 1, 0]])


def test_unknown_characters_get_the_unknown_id_and_long_strings_are_truncated() -> None:
    tok = _tok("ab", max_length=4)
    unknown = tok.space.unknown_id
    assert unknown == 3 and tok.space.vocab_size == 4
    np.testing.assert_array_equal(
        tok(["a?b", "é☃", "abababab"]),
        [[1, unknown, 2, 0], [unknown, unknown, 0, 0], [1, 2, 1, 2]],
    )


def test_a_cache_hit_returns_an_equal_fresh_array() -> None:
    tok = _tok()
    first = tok(["abc", "ba"])
    assert (tok.hits, tok.misses) == (0, 2)
    first[:] = -1  # the caller owns its array: the cache is not touched
    again = tok(["ba", "abc"])
    assert (tok.hits, tok.misses) == (2, 2)
    np.testing.assert_array_equal(again, tok.encode(["ba", "abc"]))
    assert again.flags.writeable


def test_repeats_within_a_batch_are_encoded_once_and_the_cache_is_lru() -> None:
    tok = _tok(cache_size=2)
    out = tok(["a", "a", "b", "a"])
    np.testing.assert_array_equal(out[:, 0], [3, 3, 2, 3])
    assert len(tok._cache) == 2
    tok(["a"])  # "a" is now the most recent, "b" the least
    tok(["c"])  # evicts "b"
    assert list(tok._cache) == ["a", "c"]
    np.testing.assert_array_equal(tok(["b"]), tok.encode(["b"]))


def test_tokenising_is_deterministic_and_the_cache_changes_nothing() -> None:
    words = [f"{w} door" for w in ("red", "green", "blue")] * 5 + ["x" * 30, ""]
    cached, uncached = (
        _tok("abcdefghijklmnopqrstuvwxyz ", 12),
        _tok("abcdefghijklmnopqrstuvwxyz ", 12, cache_size=0),
    )
    for _ in range(3):
        np.testing.assert_array_equal(cached(words), uncached(words))
    assert uncached.hits == 0 and cached.hits > 0


def test_a_non_string_observation_is_named() -> None:
    with pytest.raises(TypeError, match="must be a str, got int"):
        _tok()(["ab", 7])  # type: ignore[list-item]


def test_token_space_samples_padded_strings_and_pickles() -> None:
    space = TokenSpace("abc", max_length=6, min_length=1, seed=0)
    for _ in range(20):
        x = space.sample()
        assert space.contains(x)
        n = int((x != 0).sum())
        assert n >= 1 and (x[:n] != 0).all() and (x[n:] == 0).all()
    assert pickle.loads(pickle.dumps(space)) == space
    assert space != spaces.Box(0, 4, (6,), np.int32) and space != TokenSpace("abd", 6, 1)


def test_tokenised_space_replaces_text_parts_and_keeps_the_rest() -> None:
    box = spaces.Box(0, 1, (2,), np.float32)
    space = spaces.Dict(
        {"z": spaces.Text(3, charset="ab"), "a": spaces.Tuple((box, spaces.Text(2)))}
    )
    out = tokenised_space(space)
    assert list(out.spaces) == list(space.spaces)
    assert out["z"] == TokenSpace("ab", 3, 1) and out["a"][0] is box
    assert isinstance(out["a"][1], TokenSpace) and not has_text(out)
    assert tokenised_space(box) is box


class _Said(gym.Env):
    """Says one of three words; its observation is a Text alone, or a Tuple (Text, Discrete)."""

    WORDS = ("hi", "hello", "hey")

    def __init__(self, as_tuple: bool = False) -> None:
        text = spaces.Text(6, charset="ehilo y")
        self.as_tuple = as_tuple
        self.observation_space = spaces.Tuple((text, spaces.Discrete(3))) if as_tuple else text
        self.action_space = spaces.Discrete(2)

    def _obs(self) -> Any:
        i = int(self.np_random.integers(3))
        return (self.WORDS[i], i) if self.as_tuple else self.WORDS[i]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action: int) -> tuple:
        return self._obs(), 0.0, bool(action), False, {}


@pytest.mark.parametrize("as_tuple", [False, True])
def test_the_wrapper_tokenises_reset_and_step_in_the_built_space(as_tuple: bool) -> None:
    env = tokenise_text_observations(
        batch_env_from_gymnasium(lambda: _Said(as_tuple), num_envs=4, seed=3)
    )
    assert isinstance(env, TextObsBatchEnv)
    space = env.single_observation_space
    text = space[0] if as_tuple else space
    assert isinstance(text, TokenSpace) and text.charset == "ehilo y"
    with env:
        for obs in (env.reset(), env.step(np.ones(4, np.int64)).obs):
            tokens = obs[0] if as_tuple else obs
            assert tokens.shape == (4, 6) and tokens.dtype == np.int32
            for i in range(4):
                item = (tokens[i], obs[1][i]) if as_tuple else tokens[i]
                assert space.contains(item)
                said = "".join(text.charset[t - 1] for t in tokens[i] if t)
                assert said in _Said.WORDS


def test_env_spec_declares_and_builds_the_tokenised_space() -> None:
    spec = EnvSpec(
        "t/Said-v0",
        lambda num_envs, seed: batch_env_from_gymnasium(_Said, num_envs, seed),
        "t",
        _observation_space=spaces.Text(6, charset="ehilo y"),
        _action_space=spaces.Discrete(2),
    )
    assert spec.observation_space == TokenSpace("ehilo y", 6, 1)
    env = spec.build(num_envs=2, seed=0)
    with env:
        assert env.single_observation_space == spec.observation_space
        assert env.reset().shape == (2, 6)


def test_an_env_without_text_is_not_wrapped() -> None:
    env = batch_env_from_gymnasium(lambda: gym.make("CartPole-v1"), num_envs=2, seed=0)
    with env:
        assert tokenise_text_observations(env) is env
