"""Each side of a side-by-side run reads its own checkout's copy of a config, and a difference
between the two copies is shown rather than silently timed."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import commits_side_by_side as sbs  # noqa: E402


def test_a_config_in_this_checkout_is_read_from_each_sides_own_checkout(tmp_path: Path) -> None:
    config = sbs.ROOT / "configs" / "mt10.yaml"
    old_tree = tmp_path / "old"
    (old_tree / "configs").mkdir(parents=True)
    own = old_tree / "configs" / "mt10.yaml"
    own.write_text("name: mt10\nlearner:\n  model:\n    encoder_dim: 128\n")
    assert sbs.side_config(old_tree, config) == own
    assert sbs.side_config(sbs.ROOT, config) == config
    # a checkout without the file, and a config outside this checkout: the path as given
    assert sbs.side_config(tmp_path / "bare", config) == config
    outside = tmp_path / "mine.yaml"
    assert sbs.side_config(old_tree, outside) == outside


def test_the_differing_lines_of_the_two_copies_are_reported(tmp_path: Path) -> None:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text("model:\n  encoder_dim: 128\n")
    new.write_text("model:\n  encoder_layers: 2\n  encoder_dim: 128\n")
    assert sbs.config_difference(old, new) == ["+   encoder_layers: 2"]
    assert sbs.config_difference(old, old) == []
