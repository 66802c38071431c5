"""Every CUDA path, run for real on a GPU (skipped where torch sees none).

The rest of the suite runs on the GPU too wherever a config leaves ``learner.device: auto``;
these tests pin each CUDA-specific path and compare it with the CPU where the two must agree:
the learner and per-task PopArt, central inference for actor processes (pinned host buffers,
non-blocking copies), one NCCL rank under torchrun with each model-parallel mode, Anakin's
compiled unroll (CUDA graphs), and SAC's replay feeding a GPU learner.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import parse_config
from mtrl.config.learner import LearnerConfig, ModelConfig
from mtrl.learner.batch import TaskBatch, task_batch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.train.progress import TrainResult
from mtrl.train.trainer import Trainer

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.timeout(300),
]

GPU = "cuda"
SMALL = ModelConfig(encoder_dim=32, torso=[32])
SPACES = [
    TaskSpaces(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)),
    TaskSpaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,))),
]


def _batch(task: int, spaces: TaskSpaces, rewards_scale: float, seed: int) -> TaskBatch:
    t, n = 8, 6
    rng = np.random.default_rng(seed)
    spaces.observation_space.seed(seed)
    spaces.action_space.seed(seed)
    obs = np.stack([[spaces.observation_space.sample() for _ in range(n)] for _ in range(t + 1)])
    acts = np.stack([[spaces.action_space.sample() for _ in range(n)] for _ in range(t)])
    done = rng.random((t, n)) < 0.1
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(obs),
        actions=torch.as_tensor(acts),
        behaviour_logp=torch.as_tensor(-rng.random((t, n)), dtype=torch.float32),
        rewards=torch.as_tensor(rng.normal(size=(t, n)) * rewards_scale, dtype=torch.float32),
        terminated=torch.as_tensor(done),
        truncated=torch.zeros(t, n, dtype=torch.bool),
        valid=torch.ones(t, n, dtype=torch.bool),
        policy_version=0,
    )


def test_the_learner_and_per_task_popart_on_cuda_match_the_cpu() -> None:
    """Five updates on two tasks whose rewards differ by 1000x: same weights, same PopArt."""
    torch.manual_seed(0)
    cpu_model = MultiTaskModel(SPACES, SMALL)
    cuda_model = copy.deepcopy(cpu_model).to(GPU)
    cpu, gpu = (
        ImpalaLearner(m, LearnerConfig(model=SMALL, device=d), ["a", "b"])
        for m, d in ((cpu_model, "cpu"), (cuda_model, GPU))
    )
    for step in range(5):
        batches = [_batch(0, SPACES[0], 1.0, step), _batch(1, SPACES[1], 1000.0, 100 + step)]
        for learner in (cpu, gpu):
            learner.update([task_batch(b, learner.device) for b in batches])
    assert gpu.device.type == gpu.mu.device.type == torch.device(GPU).type
    assert gpu.optimizer.defaults["fused"] is True  # one kernel for Adam's whole step
    pairs = zip(cpu_model.named_parameters(), cuda_model.parameters(), strict=True)
    for (name, p_cpu), p_gpu in pairs:
        assert p_gpu.device == gpu.device
        torch.testing.assert_close(p_gpu.cpu(), p_cpu, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(gpu.mu.cpu(), cpu.mu, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(gpu.nu.cpu(), cpu.nu, rtol=1e-6, atol=1e-6)
    assert gpu.mu[1].abs() > 10 * gpu.mu[0].abs()  # the statistics are the tasks' own


def _train(yaml: str) -> TrainResult:
    """Train a config whose ``{GPU}`` stands for the GPU's device name."""
    trainer = Trainer(parse_config(yaml.replace("{GPU}", GPU)), write_run_dir=False, console=False)
    try:
        result = trainer.run()
        assert trainer.learner.device.type == torch.device(GPU).type
        return result
    finally:
        trainer.close()


def test_actor_processes_act_through_central_inference_on_the_gpu() -> None:
    """Process actors send observations to the GPU inference server; CartPole learns."""
    result = _train(
        """
        total_env_steps: 400000
        stop_at_target: true
        tasks:
          - {env: gymnasium/CartPole-v1, num_envs: 16, target_score: 400}
        scheduler: {num_actors: 2}
        actors: {mode: process, inference: central}
        learner: {batch_size: 16, device: {GPU}}
        """
    )
    (task,) = result.tasks
    assert result.updates > 0
    assert task.mean_return is not None and task.mean_return >= 400, task


def test_sac_trains_from_its_replay_on_the_gpu() -> None:
    """SAC's replay on the host feeding gradient steps on the GPU: Pendulum improves."""
    result = _train(
        """
        total_env_steps: 6000
        tasks:
          - {env: gymnasium/Pendulum-v1, num_envs: 4}
        actors: {mode: serial}
        learner:
          algorithm: sac
          device: {GPU}
          batch_size: 4
          unroll_length: 8
          model: {encoder_dim: 64, torso: [64]}
          sac: {learning_starts: 1000}
        """
    )
    (task,) = result.tasks
    assert result.updates > 0
    assert task.mean_return is not None and np.isfinite(task.mean_return)


def test_a_sac_gradient_step_never_waits_for_the_gpu() -> None:
    """With uniform replay, nothing in a gradient step reads a GPU value back or copies to
    the GPU from pageable memory: a sync would stall the host until every queued kernel ran
    (29 per step before, docs/BENCHMARKS.md "GPU, second lease")."""
    from mtrl.algorithms.sac import make_sac_learner

    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        "learner: {algorithm: sac, unroll_length: 8, device: cuda,"
        " model: {encoder_dim: 16, torso: [16]},"
        " sac: {batch_size: 64, learning_starts: 16, replay_ratio: 1}}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel(SPACES, cfg.learner.model).to(GPU)
    learner = make_sac_learner(model, cfg.learner, ["a", "b"])
    for step in range(4):
        learner.update(
            [task_batch(_batch(k, s, 1.0, 10 * step + k), GPU) for k, s in enumerate(SPACES)]
        )
    ready = learner.ready_tasks()
    assert ready == [0, 1]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            learner._gradient_step(ready)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_sac_on_cuda_runs_same_shaped_tasks_stacked_and_steps_as_one_by_one() -> None:
    """On a CUDA GPU the tasks' same-shaped encoders and heads run as one batched call by
    default (mtrl.learner.stacked); the parameters after a run of gradient steps match the
    per-task calls' to float rounding."""
    from mtrl.algorithms.sac import make_sac_learner
    from mtrl.learner import stacked

    box = TaskSpaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)))
    spaces = [box, box, box, SPACES[0]]
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        "learner: {algorithm: sac, unroll_length: 8, device: cuda,"
        " model: {encoder_dim: 16, torso: [16]},"
        " sac: {batch_size: 64, learning_starts: 16, replay_ratio: 16}}\n"
    )
    params = {}
    for stack in (None, False):
        stacked.STACKED = stack
        try:
            torch.manual_seed(0)
            model = MultiTaskModel(spaces, cfg.learner.model).to(GPU)
            learner = make_sac_learner(model, cfg.learner, ["a", "b", "c", "d"])
            assert stacked.enabled(list(model.encoders)) is (stack is None)
            for step in range(4):
                learner.update(
                    [
                        task_batch(_batch(k, s, 1.0, 10 * step + k), GPU)
                        for k, s in enumerate(spaces)
                    ]
                )
            assert learner.gradient_steps > 0
            params[stack] = [p.detach().cpu() for p in learner.critic.parameters()]
            params[stack] += [p.detach().cpu() for p in model.parameters()]
        finally:
            stacked.STACKED = None
    for a, b in zip(params[None], params[False], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model_parallel", ["none", "task_sharded", "fsdp"])
def test_one_nccl_rank_under_torchrun_trains(tmp_path: Path, model_parallel: str) -> None:
    """``mtrl train --nproc 1`` on the GPU: torchrun, an NCCL process group, one replica."""
    cfg = tmp_path / "dp.yaml"
    cfg.write_text(
        f"""
name: nccl
total_env_steps: 8000
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 8}}
  - {{env: gymnasium/Pendulum-v1, num_envs: 8}}
actors: {{mode: serial}}
learner: {{model: {{encoder_dim: 32, torso: [32]}}, batch_size: 16, device: {GPU},
          parallel: {{model_parallel: {model_parallel}}}}}
tracking: {{run_dir: {tmp_path / "runs"}, log_every_s: 1, console: plain,
            wandb: {{mode: disabled}}}}
"""
    )
    res = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg), "--nproc", "1"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    last = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()][-1]
    assert last["charts/env_steps"] >= 8000
    assert last["charts/updates"] > 0


@pytest.mark.parametrize("compile_mode", [False, "reduce-overhead"])
def test_anakin_trains_cartpole_on_the_gpu(compile_mode: str | bool) -> None:
    """Envs, acting and learning on the device; the compiled unroll replays as a CUDA graph."""
    from mtrl.anakin import AnakinRunner, train_anakin
    from mtrl.plugins import make_env

    torch.manual_seed(0)
    env = make_env("tensor/CartPole-v1", 256, seed=0, device=GPU)
    spaces = TaskSpaces(env.single_observation_space, env.single_action_space)
    cfg = LearnerConfig(model=SMALL, device=GPU, unroll_length=16, learning_rate=3e-3)
    learner = ImpalaLearner(MultiTaskModel([spaces], SMALL).to(GPU), cfg, ["cartpole"])
    runner = AnakinRunner(0, env, 16, 1.0, compile=compile_mode)
    result = train_anakin([runner], learner, 1_500_000, target_return=300)
    returns = result.recent_returns[0]
    assert returns and np.mean(returns) >= 300, (result.env_steps, np.mean(returns))


MIXED_GPU = [
    TaskSpaces(gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-2, 2, (2,))),
    TaskSpaces(gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-2, 2, (2,))),
    TaskSpaces(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3)),
    TaskSpaces(gym.spaces.Box(0, 255, (2, 8, 8), np.uint8), gym.spaces.Discrete(2)),
]


def _stacked_sac(graphs: bool, spaces: list[TaskSpaces], on_device: bool = False) -> object:
    """A SAC learner on the GPU taking the stacked step (replayed as a CUDA graph or not), its
    replays filled, each step drawing 8 rows of every task (on the device from a mirror of the
    replay, or on the host)."""
    from mtrl.algorithms.sac import graphed, make_sac_learner

    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        "learner: {algorithm: sac, unroll_length: 8, device: cuda,"
        " model: {encoder_dim: 16, torso: [16, 16]},"
        f" sac: {{batch_size: {8 * len(spaces)}, learning_starts: 100000, replay_ratio: 24,"
        f" draw_on_device: {str(on_device).lower()}}}}}\n"
    )
    graphed.GRAPHED = graphs
    try:
        torch.manual_seed(0)
        model = MultiTaskModel(spaces, cfg.learner.model).to(GPU)
        learner = make_sac_learner(model, cfg.learner, [f"t{k}" for k in range(len(spaces))])
    finally:
        graphed.GRAPHED = True
    assert learner.stacked is not None and (learner.stacked.graphed is not None) is graphs
    assert (learner.stacked.replay is not None) is on_device
    for k, s in enumerate(spaces):
        learner.update([task_batch(_batch(k, s, 1.0, k), GPU)])  # stored, no step yet
    learner.mix.split = lambda *_: np.full(len(spaces), 8)  # type: ignore[method-assign]
    learner.rng = np.random.default_rng(1)
    learner.sac.learning_starts = 1
    return learner


@pytest.mark.parametrize("mixed", [False, True], ids=["one shape", "mixed spaces"])
def test_the_stacked_sac_step_replayed_as_a_cuda_graph_is_the_eager_step(mixed: bool) -> None:
    """The stacked step recorded once as a CUDA graph and replayed (after its eager warm-up
    steps) ends at the eager step's parameters, step for step, with the same noise (zero
    noise for mixed spaces: their groups draw it apart); a replayed step launches its graph,
    not its kernels."""
    from torch.profiler import ProfilerActivity, profile

    spaces = MIXED_GPU if mixed else [MIXED_GPU[0]] * 3
    graphed_learner = _stacked_sac(True, spaces)
    eager_learner = _stacked_sac(False, spaces)
    rows = 16  # the graph's rows per task for counts of 8: 8 x 1.25 rounded up to 8
    # Two draws a step (next observations, observations), read by the graph at each replay.
    noise = torch.zeros(2, 3, rows, 2, device=GPU)
    if mixed:
        graphed_learner._noise_like = torch.zeros_like  # type: ignore[method-assign]
        eager_learner._noise_like = torch.zeros_like  # type: ignore[method-assign]
    else:

        def fixed_noise() -> object:
            calls = iter(range(10**9))

            def fixed(mean: torch.Tensor) -> torch.Tensor:
                """The graph's padded rows read the buffer itself; 8 rows a task, its rows."""
                draw = noise[next(calls) % 2]
                return draw if mean.shape[1] == rows else draw[:, :8]

            return fixed

        graphed_learner._noise_like = fixed_noise()  # type: ignore[method-assign]
        eager_learner._noise_like = fixed_noise()  # type: ignore[method-assign]
    g = torch.Generator().manual_seed(2)
    ready = list(range(len(spaces)))
    for _ in range(7):  # the first layout, warm-up steps, the recording, replays
        noise.copy_(torch.randn(noise.shape, generator=g))
        a = graphed_learner._gradient_step(ready).cpu()
        b = eager_learner._gradient_step(ready).cpu()
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert graphed_learner.stacked.graphed.recordings == 1
    for name in ("model", "critic", "target"):
        sa = getattr(graphed_learner, name).state_dict()
        sb = getattr(eager_learner, name).state_dict()
        for key in sa:
            torch.testing.assert_close(sa[key], sb[key], rtol=1e-4, atol=1e-5, msg=key)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            graphed_learner._gradient_step(ready)
        torch.cuda.synchronize()
    launches = [e.name for e in prof.events() if "LaunchKernel" in e.name]
    graphs = [e.name for e in prof.events() if e.name.startswith("cudaGraphLaunch")]
    assert len(graphs) == 3 and len(launches) <= 3, (launches, graphs)


def test_a_step_that_cannot_be_recorded_runs_eagerly_and_says_why(capsys) -> None:
    """A recording that fails (here: a step that reads a value back while recording) leaves
    the run on the eager step, with one line saying why; no step is lost."""
    learner = _stacked_sac(True, [MIXED_GPU[0]] * 3)
    graphed_step = learner.stacked.graphed
    step = graphed_step.step

    def reads_back(flat: torch.Tensor, rows: list[int]) -> tuple[torch.Tensor, object]:
        if torch.cuda.is_current_stream_capturing():
            flat.sum().item()  # a host sync: illegal while recording
        return step(flat, rows)

    graphed_step.step = reads_back
    for _ in range(7):
        learner._gradient_step([0, 1, 2])
    assert graphed_step.failed is not None and graphed_step.recordings == 0
    assert "runs eagerly" in capsys.readouterr().out
    assert all(torch.isfinite(p).all() for p in learner.critic.parameters())


@pytest.mark.parametrize("mixed", [False, True], ids=["one shape", "mixed spaces"])
def test_batches_drawn_on_the_gpu_inside_the_graph_are_the_eager_steps(mixed: bool) -> None:
    """With the batch drawn on the device from the replay's mirror, the graph replays the draw
    too: seeded alike, the replayed step ends where the same step run eagerly ends (same rows,
    same noise), and a step is one graph launch and the counts' copy."""
    from torch.profiler import ProfilerActivity, profile

    spaces = MIXED_GPU if mixed else [MIXED_GPU[0]] * 3
    graphed_learner = _stacked_sac(True, spaces, on_device=True)
    eager_learner = _stacked_sac(False, spaces, on_device=True)
    ready = list(range(len(spaces)))
    counts = torch.full((len(spaces),), 8.0, device=GPU)
    groups = len(graphed_learner.stacked.groups)
    for step in range(7):  # the first layout (8 rows), warm-up steps, the recording, replays
        torch.cuda.manual_seed(100 + step)
        a = graphed_learner._gradient_step(ready).cpu()
        torch.cuda.manual_seed(100 + step)
        rows = [8 if step == 0 else 16] * groups  # the graph's layout after the first step
        b = eager_learner.stacked.step_on_counts(counts, rows)[0].cpu()
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert graphed_learner.stacked.graphed.recordings == 1
    for name in ("model", "critic", "target"):
        sa = getattr(graphed_learner, name).state_dict()
        sb = getattr(eager_learner, name).state_dict()
        for key in sa:
            torch.testing.assert_close(sa[key], sb[key], rtol=1e-4, atol=1e-5, msg=key)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                graphed_learner._gradient_step(ready)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    launches = [e.name for e in prof.events() if "LaunchKernel" in e.name]
    graphs = [e.name for e in prof.events() if e.name.startswith("cudaGraphLaunch")]
    # Per step: the graph, and the two fills that hand the random generator's seed and offset
    # to a replay that draws random numbers.
    assert len(graphs) == 3 and len(launches) <= 2 * 3, (launches, graphs)


def test_by_default_a_gpu_learner_draws_stored_transitions_on_the_device() -> None:
    """On a CUDA GPU the stacked, graphed step draws on the device by default (vector and image
    tasks alike), and what it draws are the host replay's transitions of each task, never a
    reset step."""
    from mtrl.algorithms.sac import make_sac_learner

    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        "learner: {algorithm: sac, unroll_length: 8, device: cuda,"
        " model: {encoder_dim: 16, torso: [16]},"
        " sac: {batch_size: 32, learning_starts: 16, replay_ratio: 4}}\n"
    )
    image = TaskSpaces(gym.spaces.Box(0, 255, (4, 16, 16), np.uint8), gym.spaces.Discrete(2))
    spaces = [*MIXED_GPU[:3], image]
    torch.manual_seed(0)
    model = MultiTaskModel(spaces, cfg.learner.model).to(GPU)
    learner = make_sac_learner(model, cfg.learner, [f"t{k}" for k in range(len(spaces))])
    mirror = learner.stacked.replay
    assert mirror is not None and learner.stacked.graphed is not None
    vectors = MultiTaskModel(MIXED_GPU[:3], cfg.learner.model).to(GPU)
    assert make_sac_learner(vectors, cfg.learner, ["a", "b", "c"]).stacked.replay is not None
    for step in range(6):
        learner.update(
            [task_batch(_batch(k, s, 1.0, 10 * step + k), GPU) for k, s in enumerate(spaces)]
        )
    assert learner.gradient_steps > 0
    counts = torch.full((len(spaces),), 5.0, device=GPU)
    batches, items = mirror.draw(counts, [5] * len(mirror.groups))
    for g, b, drawn in zip(mirror.groups, batches, items, strict=True):
        for i, task in enumerate(g.tasks):
            idx = drawn[i].cpu().numpy()
            replay = learner.replays[task]
            assert replay.sampler.state_dict()["live"].numpy()[idx].all()
            want = replay.storage.get(idx)
            np.testing.assert_array_equal(
                b.obs[i].cpu().numpy(), want.obs.reshape(len(idx), -1).astype(np.float32)
            )
            np.testing.assert_array_equal(b.rewards[i].cpu().numpy(), want.rewards)
