"""Whose turn it is: the serial pool's unrolls handed out in proportion to target data shares.

A parallel pool meets a scheduler's data shares by moving actors between tasks; the serial
pool has no actors to move, only turns in one thread. It gives them by smooth weighted round
robin (the rule of nginx's upstream balancer): every turn each task's credit grows by its rate,
the task with the most credit steps one unroll and pays back the sum of the rates. Each task's
count of turns stays within about one of its exact proportion at every moment (no bursts, so a
task's policy lag stays even), and equal rates give plain round robin in task order: the serial
pool's behaviour without a share policy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["take_turns", "turn_rates"]


def turn_rates(shares: Sequence[float | None], samples_per_unroll: Sequence[int]) -> np.ndarray:
    """Unrolls per round for each task so that its share of *samples* is ``shares[i]``.

    A task's unroll carries ``samples_per_unroll[i]`` samples (its envs × the unroll length),
    so its rate is share / samples. Shares are the scheduler's (they need not sum to 1); where
    none is set for any task every task gets the same number of unrolls, and a task without
    one among tasks with one gets their mean share. A share of 0 means no turns.
    """
    if len(shares) != len(samples_per_unroll):
        raise ValueError(f"{len(shares)} shares for {len(samples_per_unroll)} tasks")
    known = [s for s in shares if s is not None]
    if not known:
        return np.ones(len(shares))
    if any(s < 0 for s in known):
        raise ValueError(f"shares must be >= 0, got {list(shares)}")
    fill = float(np.mean(known))
    share = np.array([fill if s is None else s for s in shares], dtype=float)
    rates = share / np.asarray(samples_per_unroll, dtype=float)
    if rates.sum() <= 0:
        return np.ones(len(shares))
    return rates / rates.sum() * len(rates)  # scale-free: the mean rate is 1


def take_turns(credit: np.ndarray, rates: np.ndarray, n: int) -> tuple[list[int], np.ndarray]:
    """The next ``n`` turns (task indices, in order) and the credit to carry to the next call.

    Smooth weighted round robin: per turn every credit grows by its rate and the largest
    (the earliest task on ties) steps and pays back the rates' sum. ``credit`` is not changed.
    """
    credit = np.array(credit, dtype=float)
    rates = np.asarray(rates, dtype=float)
    if credit.shape != rates.shape:
        raise ValueError(f"credit {credit.shape} and rates {rates.shape} differ")
    if n == 0:  # nothing to hand out (a pool without tasks of its own: Anakin, other ranks')
        return [], credit
    total = float(rates.sum())
    if total <= 0:
        raise ValueError("no task has a turn: every rate is 0")
    picks: list[int] = []
    for _ in range(n):
        credit += rates
        i = int(np.argmax(credit))
        credit[i] -= total
        picks.append(i)
    return picks, credit
