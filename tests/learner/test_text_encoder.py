"""The text encoder: token ids (from the env boundary) → embedding → conv → masked max-pool."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.config import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.learner.trainable import check_trainable
from mtrl.plugins.text import Tokenizer
from mtrl.token_space import TokenSpace

CFG = ModelConfig(encoder_dim=16, torso=[16])
CHARSET = "abcdefghijklmnopqrstuvwxyz "
MISSIONS = ["go to the red door", "go to the blue door", "go", ""]


def _tokens(max_length: int, strings: list[str] = MISSIONS) -> torch.Tensor:
    return torch.as_tensor(Tokenizer(TokenSpace(CHARSET, max_length))(strings))


def test_features_do_not_depend_on_how_much_padding_follows() -> None:
    """The same strings padded to 20 and to 64 give the same features: padding is masked."""
    torch.manual_seed(0)
    short = make_encoder(TokenSpace(CHARSET, 20), CFG)
    long = make_encoder(TokenSpace(CHARSET, 64), CFG)
    long.load_state_dict(short.state_dict())  # the weights do not depend on max_length
    with torch.no_grad():
        a, b = short(_tokens(20)), long(_tokens(64))
    assert a.shape == (len(MISSIONS), CFG.encoder_dim)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a[0], a[1])  # one word apart: different features


def test_a_raw_text_space_builds_the_same_encoder_and_any_batch_shape_goes_in() -> None:
    torch.manual_seed(0)
    raw = make_encoder(spaces.Text(20, charset=CHARSET), CFG)
    torch.manual_seed(0)
    tokenised = make_encoder(TokenSpace(CHARSET, 20, 1), CFG)
    x = _tokens(20).reshape(2, 2, 20)  # [T + 1, N, max_length]
    with torch.no_grad():
        torch.testing.assert_close(raw(x), tokenised(x))
        assert raw(x).shape == (2, 2, CFG.encoder_dim)


def test_an_empty_string_gives_finite_features_and_gradients() -> None:
    encoder = make_encoder(TokenSpace(CHARSET, 8), CFG)
    out = encoder(_tokens(8, ["", "ab"]))
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in encoder.parameters() if p.grad is not None)
    assert encoder.embed.weight.grad[0].abs().sum() == 0  # padding never learns


@pytest.mark.parametrize(
    "obs",
    [
        spaces.Text(12),
        spaces.Dict({"image": spaces.Box(0, 10, (7, 7, 3), np.uint8), "mission": spaces.Text(24)}),
        spaces.Tuple((spaces.Discrete(2), spaces.Text(4, charset="xyz"))),
        spaces.Dict({"mission": TokenSpace(CHARSET, 16)}),
    ],
    ids=["text", "dict", "tuple", "tokenised"],
)
def test_check_trainable_accepts_text_alone_and_inside_dict_or_tuple(obs: spaces.Space) -> None:
    check_trainable(obs, spaces.Discrete(3), CFG)
