"""What a Text observation costs per step: tokenising at the env boundary and encoding.

    .venv/bin/python benchmarks/text_obs.py      # writes docs/results/text_obs.json

A batch of 16 BabyAI-style missions ("go to the red door", "pick up the blue key", ...; 42
distinct strings, ``max_length`` 64) is tokenised per step by :class:`mtrl.plugins.text.Tokenizer`
with its LRU cache (the default: missions repeat, so after the first steps every look-up hits)
and with the cache off (``cache_size=0``: every string converted each step), then encoded by
the task's text encoder (:mod:`mtrl.learner.encoders`, one CPU thread, no grad: the inference
server's work per step). Figures are medians over ``--repeats`` timing rounds (of ``--steps``
tokenising or ``--encode-steps`` encoding steps), in microseconds per step (per batch of 16).
A measurement of where the time goes, not a speed benchmark: the numbers move with the
machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.config import ModelConfig
from mtrl.learner.encoders import make_encoder
from mtrl.plugins.text import Tokenizer
from mtrl.token_space import TokenSpace

CHARSET = "abcdefghijklmnopqrstuvwxyz "
MAX_LENGTH = 64
BATCH = 16
COLOURS = ("red", "green", "blue", "purple", "yellow", "grey")
OBJECTS = ("door", "key", "ball")


def missions() -> list[str]:
    """42 distinct BabyAI-style missions."""
    out = [f"{verb} the {c} {o}" for verb in ("go to", "pick up") for c in COLOURS for o in OBJECTS]
    return out + [f"open the {c} door" for c in COLOURS]


def per_step_us(fn: Callable[[int], Any], steps: int, repeats: int) -> float:
    """Median over ``repeats`` rounds of the mean µs of one ``fn(step)`` call."""
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for step in range(steps):
            fn(step)
        rounds.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(rounds)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="tokenising steps per round")
    parser.add_argument("--encode-steps", type=int, default=200, help="encoding steps per round")
    parser.add_argument("--repeats", type=int, default=7, help="timing rounds (median taken)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (docs/results)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    pool = missions()
    batches = [[pool[i] for i in rng.integers(len(pool), size=BATCH)] for _ in range(args.steps)]
    space = TokenSpace(CHARSET, MAX_LENGTH, 1)
    cached, uncached = Tokenizer(space), Tokenizer(space, cache_size=0)
    cached_us = per_step_us(lambda s: cached(batches[s]), args.steps, args.repeats)
    uncached_us = per_step_us(lambda s: uncached(batches[s]), args.steps, args.repeats)
    torch.manual_seed(0)
    encoder = make_encoder(space, ModelConfig())
    tokens = [torch.as_tensor(cached(b)) for b in batches]
    with torch.no_grad():
        encode_us = per_step_us(lambda s: encoder(tokens[s]), args.encode_steps, args.repeats)
    result = {
        "what": "µs per step for a batch of 16 Text observations (medians of timing rounds)",
        "batch": BATCH,
        "max_length": MAX_LENGTH,
        "distinct_missions": len(pool),
        "encoder_dim": ModelConfig().encoder_dim,
        "tokenise_steps_per_round": args.steps,
        "encode_steps_per_round": args.encode_steps,
        "rounds": args.repeats,
        "tokenise_cached_us": round(cached_us, 2),
        "tokenise_uncached_us": round(uncached_us, 2),
        "encode_us": round(encode_us, 2),
        "total_cached_us": round(cached_us + encode_us, 2),
        "total_uncached_us": round(uncached_us + encode_us, 2),
        "cache_hit_rate": round(cached.hits / max(1, cached.hits + cached.misses), 4),
        "machine": machine(),
    }
    path = write_result("text_obs", result, args.out)
    for key in ("tokenise_cached_us", "tokenise_uncached_us", "encode_us"):
        print(f"{key:>22}: {result[key]:9.1f} µs / step of {BATCH}")
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
