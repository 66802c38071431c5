"""Per-copy random streams that batched numpy code can draw from.

mtrl's contract says copy ``i`` of a batch env seeded ``seed`` uses ``seed + i``. Batched
simulations want one vectorised draw for many copies, but one shared generator would make a
copy's path depend on its neighbours (and on ``num_envs``). :class:`CopyStreams` keeps one
``numpy.random.Generator`` per copy and a buffer of pre-drawn uniforms per copy; a vectorised
draw for a subset of copies reads each copy's next numbers from its own buffer. A copy's path
therefore depends only on its own seed and history.
"""

from __future__ import annotations

import numpy as np


class CopyStreams:
    """One generator and one uniform buffer per copy; ``uniforms`` draws for many copies at once."""

    def __init__(self, seeds: np.ndarray | list[int], block: int = 1024) -> None:
        self.generators = [np.random.default_rng(int(s)) for s in seeds]
        self._block = block
        self._buf = np.stack([g.random(block) for g in self.generators])
        self._pos = np.zeros(len(self.generators), np.int64)

    def __len__(self) -> int:
        return len(self.generators)

    def uniforms(self, copies: np.ndarray, k: int) -> np.ndarray:
        """``k`` uniforms in [0, 1) for each copy in ``copies`` (no repeats), shape ``(m, k)``."""
        if k > self._block:
            raise ValueError(f"cannot draw {k} > block={self._block} uniforms at once")
        pos = self._pos[copies]
        empty = pos + k > self._block
        if empty.any():
            # Refill exhausted rows from their own generators; leftovers are dropped, which
            # keeps each copy's stream a function of its own draws only.
            for c in copies[empty]:
                self._buf[c] = self.generators[c].random(self._block)
            self._pos[copies[empty]] = 0
            pos = self._pos[copies]
        out = self._buf[copies[:, None], pos[:, None] + np.arange(k)]
        self._pos[copies] = pos + k
        return out
