"""Per-copy random streams: each copy reads its own generator's sequence, without repeats."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("mtrl_scisim") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-scisim is not installed: pip install -e plugins_contrib/mtrl-scisim",
        allow_module_level=True,
    )

from mtrl_scisim.streams import CopyStreams


def test_each_copy_reads_its_own_sequence_in_order() -> None:
    streams = CopyStreams([5, 6, 7], block=8)
    got: dict[int, list[float]] = {0: [], 1: [], 2: []}
    rng = np.random.default_rng(0)
    for _ in range(40):
        copies = np.flatnonzero(rng.random(3) < 0.6)
        draws = streams.uniforms(copies, 2)
        assert draws.shape == (len(copies), 2)
        for c, row in zip(copies, draws, strict=True):
            got[int(c)].extend(row.tolist())
    for c, seed in enumerate([5, 6, 7]):
        # blocks of 8 hold 4 pairs exactly, so nothing is dropped at refills
        expected = np.random.default_rng(seed).random(len(got[c]))
        np.testing.assert_array_equal(got[c], expected)


def test_leftovers_are_dropped_per_copy_only() -> None:
    streams = CopyStreams([1, 2], block=5)
    first = streams.uniforms(np.array([0, 1]), 3)
    second = streams.uniforms(np.array([0]), 3)  # copy 0 has 2 left < 3: refill from its gen
    ref0 = np.random.default_rng(1).random(10)
    np.testing.assert_array_equal(first[0], ref0[:3])
    np.testing.assert_array_equal(second[0], ref0[5:8])
    np.testing.assert_array_equal(
        streams.uniforms(np.array([1]), 2)[0], np.random.default_rng(2).random(5)[3:5]
    )
    with pytest.raises(ValueError, match="block"):
        streams.uniforms(np.array([0]), 6)
