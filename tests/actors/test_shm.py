"""Shared-memory arenas: what one process writes, another reads, with no copies."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
from gymnasium import spaces

from mtrl.actors.shm import Arena, ArenaLayout, plan_layout
from mtrl.actors.unroll import UnrollBuffer, obs_row, unroll_fields


def _child_writes(layout: ArenaLayout) -> None:
    arena = Arena.attach(layout)
    arena.arrays["a"][:] = np.arange(12, dtype=np.float32).reshape(3, 4)
    arena.arrays["b"][1] = True
    arena.close()


def test_a_spawned_process_writes_into_the_parents_arrays():
    arena = Arena.create({"a": ((3, 4), np.float32), "b": ((5,), bool)})
    try:
        p = mp.get_context("spawn").Process(target=_child_writes, args=(arena.layout,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        np.testing.assert_array_equal(arena.arrays["a"], np.arange(12).reshape(3, 4))
        assert arena.arrays["b"].tolist() == [False, True, False, False, False]
        assert Path(arena.layout.path).exists()
    finally:
        arena.close()
    assert not Path(arena.layout.path).exists(), "the owner unlinks the file"


def test_layout_aligns_every_array_to_64_bytes():
    layout = plan_layout("x", {"a": ((3,), np.uint8), "b": ((7,), np.float64), "c": ((), bool)})
    offsets = [s.offset for s in layout.arrays.values()]
    assert offsets == [0, 64, 128]
    assert all(o % 64 == 0 for o in offsets)
    assert layout.size >= 128 + 1


def test_dict_observations_nest_by_slash_and_share_memory():
    obs_space = spaces.Dict(
        {
            "image": spaces.Box(0, 255, (2, 3), np.uint8),
            "inner": spaces.Dict({"v": spaces.Discrete(3)}),
        }
    )
    fields = unroll_fields(4, 2, obs_space, spaces.Box(-1, 1, (2,)))
    assert fields["obs/image"] == ((5, 2, 2, 3), np.dtype(np.uint8))
    assert fields["obs/inner/v"] == ((5, 2), np.dtype(np.int64))
    arena = Arena.create(fields)
    try:
        buf = UnrollBuffer.from_arrays(0, arena.arrays)
        buf.obs["inner"]["v"][1] = 7
        assert arena.arrays["obs/inner/v"][1].tolist() == [7, 7]
        assert obs_row(buf.obs, 1)["inner"]["v"].tolist() == [7, 7]
        assert buf.actions.shape == (4, 2, 2) and buf.actions.dtype == np.float32
        assert buf.versions.shape == (4,)
    finally:
        arena.close()
