"""Sharded replay scenarios on real Ray, each run in its own process (and private network
namespace) by :func:`ray_netns.run_scenario` with ``script=`` this file."""

from __future__ import annotations

from typing import Any

import numpy as np
from scenarios import DEADLINE_S, QUIET, _cluster, main, stopping_when  # run as a script here

T, N = 5, 4


def _front(replay: dict[str, Any], capacity: int) -> Any:
    """Task 0's replay of transitions as ``replay`` (a ``replay:`` section) says."""
    from gymnasium import spaces

    from mtrl.config.replay import ReplayConfig
    from mtrl.replay import TransitionStorage, task_replay

    obs, act = spaces.Box(-1e9, 1e9, (3,), np.float32), spaces.Discrete(4)
    return task_replay(TransitionStorage(0, obs, act, T, capacity), ReplayConfig(**replay))


def _unroll(value: float) -> Any:
    from gymnasium import spaces

    from mtrl.actors.unroll import UnrollBuffer

    obs, act = spaces.Box(-1e9, 1e9, (3,), np.float32), spaces.Discrete(4)
    buf = UnrollBuffer.allocate(0, T, N, obs, act)
    buf.obs[:] = value
    buf.valid[:] = True
    return buf


def _settle(front: Any, count: int) -> None:
    """Wait until the shards acknowledge ``count`` items."""
    while front.sampler.count < count:
        front.collect(block=True)


def proportions_follow_priorities(batches: int = 300, draw_batches: int = 1) -> dict[str, Any]:
    """Two shards on two worker nodes (the head offers no CPUs); priorities set item by item;
    ``batches`` draws of 1000 (prefetched; ``draw_batches`` of them per call to the shards)
    counted per item."""
    from scipy import stats

    from mtrl.replay.shard_math import encode

    _, workers = _cluster([{"num_cpus": 2}, {"num_cpus": 2}])
    replay = {
        "sampler": "prioritized",
        "priority_alpha": 0.7,
        "priority_beta": 0.5,
        "shards": {"count": 2, "num_cpus": 1, "draw_batches": draw_batches},
    }
    front = _front(replay, 80)  # 40 items per shard
    for k in range(4):
        front.add_unroll(_unroll(k))
    _settle(front, 80)
    rng = np.random.default_rng(11)
    td = rng.gamma(0.5, 2.0, 80)
    td[40:] *= 5.0  # the second shard far heavier
    front.update_priorities(encode(np.repeat([0, 1], 40), np.tile(np.arange(40), 2), 40), td)
    front.refresh()  # the update sent, then the shards' stats after it
    masses = (np.abs(td) + 1e-6) ** 0.7
    hits = np.zeros(80)
    weights_ok = True
    first = []  # rows of the first shard per batch: binomial if batches are mixed
    for _ in range(batches):
        _, idx, w = front.sample(1000, rng)
        np.add.at(hits, idx, 1)
        first.append(int(np.count_nonzero(idx < 40)))
        want = (masses.min() / masses[idx]) ** 0.5
        weights_ok &= bool(np.allclose(w, want, rtol=1e-5))
    test = stats.chisquare(hits, masses / masses.sum() * hits.sum())
    share = float(masses[:40].sum() / masses.sum())
    # the same count drawn by the items' share of their own shard only (a wrong split)
    by_count = np.concatenate([m / m.sum() / 2 for m in np.split(masses, 2)])
    wrong = stats.chisquare(hits, by_count * hits.sum())
    return {
        "pvalue": float(test.pvalue),
        "wrong_pvalue": float(wrong.pvalue),
        "draws": float(hits.sum()),
        "weights_ok": weights_ok,
        "dispersion": float(np.var(first) / (1000 * share * (1 - share))),
        "shard_nodes": sorted(front.group.where().values()),
        "workers": sorted(w.node_id for w in workers),
    }


def limiter_holds_ratio() -> dict[str, Any]:
    """Two ways the sides disagree with samples_per_insert 2: inserts far ahead (the learner
    draws 16 per 20 items inserted; ``waits: actors`` holds unrolls back) and draws asked for
    right after each insert, from the first (``waits: learner``: each waits for the inserts to
    be acknowledged, the first for ``min_size_to_sample``)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    out = {}
    for waits, per_insert in (("actors", 16), ("learner", 40)):
        limit = {
            "samples_per_insert": 2.0,
            "min_size_to_sample": 20,
            "error_buffer": 40.0,
            "waits": waits,
        }
        front = _front({"shards": {"count": 2, "rate_limit": limit}}, 10_000)
        rng = np.random.default_rng(0)
        for k in range(100):
            front.add_unroll(_unroll(k))
            if waits == "learner" or front.sampler.count >= 20:
                front.sample(per_insert, rng)
        m = front.metrics()
        out[waits] = {**m, "ratio": m["samples"] / m["inserts"]}
    return out


def shard_lost_mid_run() -> dict[str, Any]:
    """Two mixed shards filled with 40 items each; shard 0 is killed; the run draws and inserts
    on: the loss is counted once, its items reported, the shard started again and filled."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    front = _front({"shards": {"count": 2}}, 80)
    for k in range(4):
        front.add_unroll(_unroll(k))
    _settle(front, 80)
    old = front.group.handles[(None, 0)]
    front.group.kill((None, 0))
    rng = np.random.default_rng(0)
    rows = []
    for k in range(8):
        batch, _, _ = front.sample(32, rng)
        rows.append(int(batch.rewards.shape[0]))
        front.add_unroll(_unroll(10 + k))
    while front._adds:
        front.collect(block=True)
    return {
        "rows": rows,
        "lost_shards": front.group.lost_shards,
        "lost_items": front.group.lost_items,
        "restarted": front.group.handles[(None, 0)] is not old,
        "per_shard": [s.count for s in front.stats],
    }


def call_sent_before_a_loss_fails_after_the_restart() -> dict[str, Any]:
    """Shard 0 is killed; an insert is sent to it before anything notices; a stats call then
    finds it lost and starts it again; the insert's failure, taken in after that, is the old
    shard's and must not count a second loss nor replace the new shard."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    front = _front({"shards": {"count": 2}}, 80)
    for k in range(4):
        front.add_unroll(_unroll(k))
    _settle(front, 80)
    front.group.kill((None, 0))
    front.add_unroll(_unroll(10))  # to shard 0, whose actor is gone: the call fails
    pending = len(front._adds)
    front.refresh()  # a stats call to shard 0 fails: lost, started again
    restarted = front.group.handles[(None, 0)]
    lost_then = front.group.lost_shards
    while front._adds:
        front.collect(block=True)  # the insert's failure comes in now
    front.add_unroll(_unroll(11))  # to shard 1
    front.add_unroll(_unroll(12))  # to the restarted shard 0
    while front._adds:
        front.collect(block=True)
    return {
        "pending": pending,
        "lost_then": lost_then,
        "lost_shards": front.group.lost_shards,
        "same_shard": front.group.handles[(None, 0)] is restarted,
        "per_shard": [s.count for s in front.stats],
    }


def _two_cartpoles(actors: str, num_actors: int, replay: str, algorithm: str, rule: str) -> Any:
    """A config of two CartPole tasks of 4 envs with the ``actors:`` and ``replay:`` sections
    given (YAML flow), ``num_actors`` actors, ``algorithm`` and its ``rule`` settings line."""
    from mtrl.config import parse_config

    return parse_config(
        f"""
name: shards
total_env_steps: 1000000
tasks:
  - {{env: gymnasium/CartPole-v1, name: a, num_envs: 4}}
  - {{env: gymnasium/CartPole-v1, name: b, num_envs: 4}}
actors: {actors}
scheduler: {{num_actors: {num_actors}}}
replay: {replay}
learner:
  algorithm: {algorithm}
  unroll_length: 8
  batch_size: 8
  model: {{encoder_dim: 16, torso: [16]}}
  {rule}
"""
        + QUIET
    )


def sac_trains_on_shards(algorithm: str = "sac") -> dict[str, Any]:
    """A real run: two CartPole tasks, Ray actors, ``algorithm`` with per-task shards."""
    from mtrl.replay import ShardedTaskReplay, replay_metrics
    from mtrl.train.trainer import Trainer

    rule = (
        "sac: {batch_size: 32, learning_starts: 64, replay_ratio: 1}"
        if algorithm == "sac"
        else "impala_replay: {proportion: 0.5}"
    )
    cfg = _two_cartpoles(
        "{mode: ray, ray: {num_cpus: 2}}",
        2,
        "{capacity: 2000, shards: {count: 2, layout: per_task}}",
        algorithm,
        rule,
    )
    want = 3000

    def replays_of(learner: Any) -> list[Any]:
        replays = list(getattr(learner, "replays", {}).values()) if algorithm != "sac" else []
        return replays or list(learner.replays)

    def done(t: Any) -> bool:
        # SAC's check wants data in every task's shards: an actor that starts late on a busy
        # machine must not leave its task empty at the step count.
        counts = [r.sampler.count for r in replays_of(t.learner)]
        return t.env_steps >= want and (algorithm != "sac" or all(c > 0 for c in counts))

    trainer = stopping_when(done, Trainer)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        learner = trainer.learner
        replays = replays_of(learner)
        diagnostics = learner.pop_diagnostics()
        counts = [r.sampler.count for r in replays]
        sharded = all(isinstance(r, ShardedTaskReplay) for r in replays)
        where = replays[0].group.where()
        metrics = replay_metrics(replays)
    finally:
        trainer.close()
    return {
        "env_steps": result.env_steps,
        "deadline_s": DEADLINE_S,
        "sharded": sharded,
        "counts": counts,
        "gradient_steps": getattr(learner, "gradient_steps", None),
        "shards": len(where),
        "metrics": metrics,
        "diagnostics_have_replay": any(k.startswith("replay/") for k in diagnostics),
    }


def sac_inserts_at_actors(waits: str = "actors") -> dict[str, Any]:
    """A real SAC run on a head without CPUs and two worker nodes, two mixed shards (one per
    worker), Ray actors storing their unrolls in their own node's shard: what reached the
    learner, where each shard's data came from, the rate limiter's waits. With
    ``waits: actors`` shard 0 is then killed mid-run and the run goes on."""
    from mtrl.replay import replay_metrics
    from mtrl.train.trainer import Trainer

    _, workers = _cluster([{"num_cpus": 2}, {"num_cpus": 2}])
    limit = (
        "{samples_per_insert: 2, min_size_to_sample: 64, error_buffer: 64, waits: actors, "
        "max_wait_s: 0.2}"
        if waits == "actors"
        else "{samples_per_insert: 0.5, min_size_to_sample: 64, error_buffer: 64, "
        "waits: learner, max_wait_s: 2}"
    )
    cfg = _two_cartpoles(
        "{mode: ray}",
        4,
        f"{{capacity: 4000, shards: {{count: 2, rate_limit: {limit}}}}}",
        "sac",
        "sac: {batch_size: 32, learning_starts: 64, replay_ratio: 1, normalize_obs: true}",
    )
    seen: dict[str, Any] = {}

    def snapshot(t: Any) -> dict[str, Any]:
        group = t.learner.replays[0].group
        return {
            "env_steps": t.env_steps,
            "pool": t.pool.metrics(),
            "sources": group.sources(),
            "where": group.where(),
            "replay": replay_metrics(t.learner.replays),
        }

    def done(t: Any) -> bool:
        counts = [r.sampler.count for r in t.learner.replays]
        if "before" not in seen:
            if t.env_steps < 2000 or min(counts) == 0 or t.learner.gradient_steps == 0:
                return False
            seen["before"] = snapshot(t)
            if waits != "actors":
                return True
            t.learner.replays[0].group.kill((None, 0))
            return False
        return t.learner.replays[0].group.lost_shards >= 1 and (
            t.env_steps >= seen["before"]["env_steps"] + 2000
        )

    trainer = stopping_when(done, Trainer)(cfg, write_run_dir=False, console=False)
    try:
        result = trainer.run()
        after = snapshot(trainer)
        norm = trainer.learner.obs_norm.norms[0]
        obs_count = float(norm.count) if norm is not None else 0.0
    finally:
        trainer.close()
    return {
        "env_steps": result.env_steps,
        "workers": sorted(w.node_id for w in workers),
        "before": seen.get("before"),
        "after": after,
        "obs_count": obs_count,
    }


if __name__ == "__main__":
    main(globals())
