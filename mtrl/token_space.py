"""The tokenised form of a text observation: what actors store and the learner embeds.

A text observation is a ``gymnasium.spaces.Text`` part, or any other space whose samples are
strings (MiniGrid's ``MissionSpace``, a plugin's own): :func:`is_string_space` says which, and
a space that is not a ``Text`` gets :data:`STRING_CHARSET` and :data:`STRING_MAX_LENGTH`
(:meth:`TokenSpace.from_space`).

Strings cannot go into the preallocated numeric unroll slots, so the plugin layer turns every
Text part of an observation into token ids at the env boundary
(:mod:`mtrl.plugins.text`), and the learner embeds them (:mod:`mtrl.learner.encoders`). Both
sides agree on one vocabulary, defined here:

* ``0`` is padding (after the end of the string);
* ``1 .. len(charset)`` are the space's characters in its charset order
  (``Text.character_list``: the given order for a string charset, sorted for a set);
* ``len(charset) + 1`` is "unknown": a character outside the charset.

:class:`TokenSpace` is a ``Box(0, len(charset) + 1, (max_length,), int32)`` that remembers its
charset, so slot allocation, random sampling and bounds checks treat it as any integer Box while
the encoder factory knows to embed it rather than read it as a numeric vector. This module is a
leaf (gymnasium and numpy only) because both the plugin layer and the learner import it and
neither may import the other (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import copy
import string
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "PAD_ID",
    "STRING_CHARSET",
    "STRING_MAX_LENGTH",
    "TokenSpace",
    "has_text",
    "is_string_space",
    "tokenised_space",
]

PAD_ID = 0
"""Token id of padding (positions after the end of the string)."""

STRING_CHARSET = string.ascii_lowercase + string.ascii_uppercase + string.digits + " ,.;:'!?-_()"
"""Characters of a string space that declares none (anything else is "unknown")."""

STRING_MAX_LENGTH = 128
"""Characters kept of a string from a space that declares no length (BabyAI's longest
missions are about 100)."""

#: Spaces whose samples are never strings (not sampled to find out).
_NOT_STRINGS = (
    spaces.Box,
    spaces.Discrete,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
    spaces.Dict,
    spaces.Tuple,
    spaces.Sequence,
    spaces.Graph,
    spaces.OneOf,
)


def is_string_space(space: gym.Space) -> bool:
    """Whether ``space``'s samples are strings: a ``Text``, or another space (MiniGrid's
    ``MissionSpace``) whose ``sample()`` returns a ``str`` — drawn from a copy, so the space's
    own random state does not move."""
    if isinstance(space, spaces.Text):
        return True
    if isinstance(space, _NOT_STRINGS) or not isinstance(space, gym.Space):
        return False
    try:
        return isinstance(copy.deepcopy(space).sample(), str)
    except Exception:  # a space that cannot sample is not one we can read as text
        return False


class TokenSpace(spaces.Box):
    """Token ids of a string of at most ``max_length`` characters from ``charset`` (see the
    module docstring for the vocabulary): ``int32`` of shape ``(max_length,)``."""

    def __init__(
        self,
        charset: str,
        max_length: int,
        min_length: int = 0,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if not charset or len(set(charset)) != len(charset):
            raise ValueError(f"TokenSpace: charset must be non-empty and unique, got {charset!r}")
        if not 0 <= min_length <= max_length or max_length < 1:
            raise ValueError(
                f"TokenSpace: need 0 <= min_length <= max_length and max_length >= 1, got "
                f"min_length={min_length}, max_length={max_length}"
            )
        self.charset = str(charset)
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        super().__init__(0, len(charset) + 1, (self.max_length,), np.int32, seed=seed)

    @classmethod
    def from_text(cls, text: spaces.Text) -> TokenSpace:
        """The tokenised form of a gymnasium Text space (its charset order, its lengths)."""
        return cls("".join(text.character_list), text.max_length, text.min_length)

    @classmethod
    def from_space(cls, space: gym.Space) -> TokenSpace:
        """The tokenised form of any string space (:func:`is_string_space`): a ``Text``'s own
        charset and lengths, else :data:`STRING_CHARSET` and :data:`STRING_MAX_LENGTH`."""
        if isinstance(space, spaces.Text):
            return cls.from_text(space)
        return cls(STRING_CHARSET, STRING_MAX_LENGTH)

    @property
    def vocab_size(self) -> int:
        """Number of token ids: padding, one per character, unknown."""
        return len(self.charset) + 2

    @property
    def unknown_id(self) -> int:
        """Token id of a character outside the charset."""
        return len(self.charset) + 1

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        """A random string's tokens: a length in ``[min_length, max_length]``, characters
        uniform over the charset, padding after (unlike a Box's uniform ids everywhere)."""
        if mask is not None or probability is not None:
            raise NotImplementedError("TokenSpace.sample takes no mask or probability")
        n = int(self.np_random.integers(self.min_length, self.max_length + 1))
        out = np.zeros(self.max_length, np.int32)
        out[:n] = self.np_random.integers(1, len(self.charset) + 1, size=n)
        return out

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TokenSpace)
            and self.charset == other.charset
            and self.max_length == other.max_length
            and self.min_length == other.min_length
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like every gymnasium space

    def __repr__(self) -> str:
        chars = self.charset if len(self.charset) <= 40 else f"{self.charset[:37]}..."
        return (
            f"TokenSpace(max_length={self.max_length}, vocab={self.vocab_size}, charset={chars!r})"
        )


def has_text(space: gym.Space) -> bool:
    """Whether ``space`` is, or contains (in a Dict or Tuple), a string space."""
    if is_string_space(space):
        return True
    if isinstance(space, spaces.Dict):
        return any(has_text(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return any(has_text(s) for s in space.spaces)
    return False


def tokenised_space(space: gym.Space) -> gym.Space:
    """``space`` with every string part replaced by its :class:`TokenSpace` (Dict keys keep
    their order); ``space`` itself when it has no string part."""
    if not has_text(space):
        return space
    if is_string_space(space):
        return TokenSpace.from_space(space)
    if isinstance(space, spaces.Dict):
        return spaces.Dict(OrderedDict((k, tokenised_space(s)) for k, s in space.spaces.items()))
    assert isinstance(space, spaces.Tuple)
    return spaces.Tuple(tuple(tokenised_space(s) for s in space.spaces))
