"""The pre-flight memory check: its arithmetic against real allocations, and the refusal of a
config that cannot fit by ``mtrl validate`` and ``mtrl train`` before anything large exists."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.actors.shm import Arena
from mtrl.actors.unroll import UnrollBuffer, unroll_fields
from mtrl.cli import main
from mtrl.config import ExperimentConfig
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.optim import make_optimizer
from mtrl.learner.torsos import make_torso
from mtrl.train import memory_estimate as me
from mtrl.train import preflight

ROOT = Path(__file__).parents[1]
HUGE = 100_000_000
GiB = 2**30

CARTPOLE = (spaces.Box(-np.inf, np.inf, (4,), np.float32), spaces.Discrete(2))
BREAKOUT = (spaces.Box(0, 1, (4, 10, 10), np.uint8), spaces.Discrete(3))
PENDULUM = (spaces.Box(-np.inf, np.inf, (4,), np.float64), spaces.Box(-3.0, 3.0, (1,), np.float32))
DICT_OBS = (
    spaces.Dict({"pos": spaces.Box(0, 1, (3,), np.float32), "id": spaces.Discrete(5)}),
    spaces.MultiDiscrete([3, 4]),
)
ALL_SPACES = [CARTPOLE, BREAKOUT, PENDULUM, DICT_OBS]


def _cfg(**over: object) -> ExperimentConfig:
    tasks = over.pop("tasks", [{"env": "gymnasium/CartPole-v1", "num_envs": 16}])
    return ExperimentConfig.model_validate({"tasks": tasks, **over})


# -- the arithmetic against real sizes ------------------------------------------------------------
@pytest.mark.parametrize("obs_space, act_space", ALL_SPACES)
@pytest.mark.parametrize("T, N", [(1, 1), (20, 16), (7, 33)])
def test_unroll_bytes_equal_an_allocated_unroll(obs_space, act_space, T: int, N: int) -> None:
    buf = UnrollBuffer.allocate(0, T, N, obs_space, act_space)
    obs = buf.obs.values() if isinstance(buf.obs, dict) else [buf.obs]
    real = sum(a.nbytes for a in obs) + sum(
        getattr(buf, f).nbytes
        for f in ("actions", "behaviour_logp", "rewards", "terminated", "truncated", "valid")
    )
    real += buf.versions.nbytes
    obs_b, act_b = me.space_bytes(obs_space), me.action_bytes(act_space)
    assert me.unroll_bytes(T, N, obs_b, act_b) == real


@pytest.mark.parametrize("obs_space, act_space", ALL_SPACES)
def test_slot_estimate_matches_a_shared_memory_arena(obs_space, act_space) -> None:
    """The arena an actor gets (:meth:`ParallelPool.start_actor`): every slot's fields, each
    aligned to 64 bytes."""
    T, N, slots = 20, 16, 2
    fields = unroll_fields(T, N, obs_space, act_space)
    arena = Arena.create({f"s{i}:{k}": f for i in range(slots) for k, f in fields.items()})
    try:
        est = slots * me.unroll_bytes(T, N, me.space_bytes(obs_space), me.action_bytes(act_space))
        assert est <= arena.layout.size <= est + 64 * slots * len(fields)
    finally:
        arena.close()


@pytest.mark.parametrize("spaces_", [[CARTPOLE, BREAKOUT, PENDULUM], [DICT_OBS]])
def test_parameters_and_adam_state_match_a_real_model(spaces_) -> None:
    """Task parameters from the meta device + torso + value rows = the real model's; weights,
    gradients and Adam's two moments are 4 float32 copies of them."""
    tasks = [{"env": "a/b", "name": str(i)} for i in range(len(spaces_))]
    cfg = _cfg(tasks=tasks, learner={"model": {"encoder_dim": 32, "torso": [48, 24]}})
    sizes = preflight.task_sizes(cfg, spaces_)
    mc = cfg.learner.model
    params = sum(s.params for s in sizes) + me.mlp_params(mc.encoder_dim, mc.torso)
    params += len(spaces_) * (mc.torso[-1] + 1)
    model = MultiTaskModel([TaskSpaces(*s) for s in spaces_], mc)
    assert params == sum(p.numel() for p in model.parameters())
    opt = make_optimizer(list(model.parameters()), cfg.learner)
    sum(p.sum() for p in model.parameters()).backward()
    opt.step()
    state = [t for s in opt.state.values() for t in s.values() if t.numel() > 1]
    real = sum(p.nbytes + p.grad.nbytes for p in model.parameters()) + sum(t.nbytes for t in state)
    assert me.model_state_bytes(params, "adam", inference_copy=False) == pytest.approx(
        real, rel=1e-3
    )


@pytest.mark.parametrize("block, torso", [("mlp", [48, 24]), ("residual", [24, 24, 24])])
def test_the_torsos_parameters_are_counted(block: str, torso: list[int]) -> None:
    cfg = _cfg(learner={"model": {"encoder_dim": 32, "torso": torso, "torso_block": block}})
    real = make_torso(cfg.learner.model, num_tasks=2)
    assert me.torso_params(cfg.learner.model) == sum(p.numel() for p in real.parameters())


@pytest.mark.parametrize(
    "core", [{"kind": "lstm", "hidden": 20}, {"kind": "gru", "hidden": 12, "shared": False}]
)
def test_a_recurrent_cores_parameters_and_unroll_states_are_counted(core: dict) -> None:
    spaces_ = [CARTPOLE, PENDULUM]
    tasks = [{"env": "a/b", "name": str(i)} for i in range(len(spaces_))]
    model_cfg = {"encoder_dim": 32, "torso": [48], "core": core}
    cfg = _cfg(tasks=tasks, learner={"model": model_cfg})
    mc = cfg.learner.model
    shared, state = me.core_sizes(mc)
    params = sum(s.params for s in preflight.task_sizes(cfg, spaces_)) + shared
    params += me.mlp_params(mc.encoder_dim, mc.torso) + len(spaces_) * (core["hidden"] + 1)
    model = MultiTaskModel([TaskSpaces(*s) for s in spaces_], mc)
    assert params == sum(p.numel() for p in model.parameters())
    buf = UnrollBuffer.allocate(0, 5, 3, *CARTPOLE, state_size=model.state_size)
    assert state == model.state_size and buf.core_state.nbytes == 4 * state * 3


@pytest.mark.parametrize("obs_space, act_space", ALL_SPACES)
def test_activation_estimate_grows_like_the_saved_tensors(obs_space, act_space) -> None:
    """The per-row slope measured on 2 and 6 rows predicts what autograd keeps for 200 rows."""
    cfg = _cfg()
    (size,) = preflight.task_sizes(cfg, [(obs_space, act_space)])
    mc = cfg.learner.model
    assert size.row_bytes >= me.torso_row_bytes(mc.encoder_dim, mc.torso)
    ts = [TaskSpaces(obs_space, act_space)]
    model = MultiTaskModel(ts, mc)

    def saved(n: int) -> int:
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        from mtrl.learner.model import obs_to_tensor

        obs = obs_to_tensor(preflight._sample(obs_space, n))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            dist, value = model(0, obs)
            dist.log_prob(dist.sample()).sum() + value.sum()
        return sum(seen.values())

    assert saved(210) - saved(10) == pytest.approx(200 * size.row_bytes, rel=0.1)


def test_task_sizes_leave_the_torch_rng_alone() -> None:
    torch.manual_seed(3)
    before = torch.get_rng_state()
    preflight.task_sizes(_cfg(), [CARTPOLE, BREAKOUT])
    assert torch.equal(before, torch.get_rng_state())


def test_bound_sizes_are_below_every_real_space() -> None:
    cfg = _cfg()
    (low,) = preflight.bound_sizes(cfg)
    for obs_space, act_space in ALL_SPACES:
        (real,) = preflight.task_sizes(cfg, [(obs_space, act_space)])
        assert low.obs_bytes <= real.obs_bytes and low.action_bytes <= real.action_bytes
        assert low.row_bytes <= real.row_bytes and low.params <= real.params


# -- actors, parts and the verdict ----------------------------------------------------------------
def test_actor_counts_follow_the_scheduler() -> None:
    tasks = [{"env": "a/b", "name": "x", "weight": 3.0}, {"env": "a/b", "name": "y"}]
    fixed = _cfg(tasks=tasks, scheduler={"num_actors": 4})
    assert me.actor_counts(fixed, [1, 1]) == [3, 1]
    adaptive = _cfg(tasks=tasks, scheduler={"num_actors": 5, "policy": "balanced"})
    assert me.actor_counts(adaptive, [1, 100]) == [1, 4]  # the spare actors where they cost most
    serial = _cfg(tasks=tasks, actors={"mode": "serial"})
    assert me.actor_counts(serial, [1, 1]) == [1, 1]
    assert me.serial_buffers(serial) == me.SERIAL_BUFFERS  # one turn per task and round
    three = [*tasks, {"env": "a/b", "name": "z"}]
    by_share = _cfg(tasks=three, actors={"mode": "serial"}, scheduler={"policy": "progress"})
    assert me.serial_buffers(by_share) == 4  # one task may take a round's three turns
    anakin = _cfg(tasks=[tasks[0], {**tasks[1], "anakin": True}])
    assert me.actor_counts(anakin, [1, 1]) == [2, 0]


def test_estimate_counts_slots_per_actor_and_names_the_fields() -> None:
    cfg = _cfg(tasks=[{"env": "a/b", "num_envs": 1000}], scheduler={"num_actors": 3})
    sizes = [me.TaskSizes(16, 8, 0, 0.0)]
    parts = {p.what: p for p in me.estimate(cfg, sizes, on_device=False)}
    slots = parts["tasks[0] unroll slots"]
    assert slots.nbytes == 3 * 2 * me.unroll_bytes(20, 1000, 16, 8) and slots.shm
    assert [str(b) for b in slots.blame] == [
        "tasks[0].num_envs = 1000",
        "learner.unroll_length = 20",
        "actors.slots_per_actor = 2",
        "scheduler.num_actors = 3",
    ]
    assert parts["actor processes"].nbytes == 3 * me.ACTOR_PROCESS_BYTES
    assert parts["tasks[0] envs"].nbytes == 3 * me.env_bytes(1000, 16, 8)


def test_problems_refuse_above_the_headroom_only() -> None:
    part = me.Part(
        "tasks[0] unroll slots", 90, False, (me.Blame(("tasks", 0, "num_envs"), 7),), True
    )
    assert me.problems([part], host=200, shm=200) == []
    (found,) = me.problems([part], host=100, shm=100)  # the shm line would repeat the host's
    blame, msg = found
    assert blame.loc == ("tasks", 0, "num_envs")
    assert msg.startswith("tasks[0].num_envs = 7: the run needs about 90 B of host memory")
    assert "at most 85%" in msg and msg.endswith("lower tasks[0].num_envs")
    assert me.problems([part], host=None, shm=None) == []  # unknown: not checked
    (shm_only,) = me.problems([part], host=1000, shm=100)
    assert "/dev/shm" in shm_only[1]
    dev = me.Part("learner batch", 90, True, (me.Blame(("learner", "batch_size"), 8),))
    (on_dev,) = me.problems([part, dev], host=1000, device=100, device_name="cuda:0")
    assert "cuda:0 memory" in on_dev[1] and on_dev[0].loc == ("learner", "batch_size")


def test_quickstart_fits_and_its_slots_match_real_arenas(monkeypatch) -> None:
    from mtrl.config import load_config
    from mtrl.plugins import get_plugins

    plugins = get_plugins()
    cfg = load_config(ROOT / "configs/quickstart.yaml", env_ids=plugins.envs.ids())
    monkeypatch.setattr(preflight, "host_available", lambda: 4 * GiB)
    parts = preflight.check_memory(
        cfg, [plugins.env_spec(t.env) for t in cfg.tasks], torch.device("cpu")
    )
    host = sum(p.nbytes for p in parts if not p.on_device)
    assert 0.5 * GiB < host < 2 * GiB  # mostly the three actor processes
    for i, t in enumerate(cfg.tasks):
        obs_space, act_space = (
            plugins.env_spec(t.env).observation_space,
            plugins.env_spec(t.env).action_space,
        )
        fields = unroll_fields(20, t.num_envs, obs_space, act_space)
        arena = Arena.create({f"s{k}:{n}": f for k in range(2) for n, f in fields.items()})
        try:
            (slots,) = [p for p in parts if p.what == f"tasks[{i}] unroll slots"]
            assert slots.nbytes == pytest.approx(arena.layout.size, rel=0.05)  # one actor each
        finally:
            arena.close()


# -- the commands ---------------------------------------------------------------------------------
def _huge_config(tmp_path: Path, mode: str = "process") -> Path:
    path = tmp_path / "huge.yaml"
    path.write_text(
        "tasks:\n"
        "  - env: gymnasium/CartPole-v1\n"
        f"    num_envs: {HUGE}\n"
        f"actors: {{mode: {mode}}}\n"
        "learner: {device: cpu}\n"  # host memory under test (a GPU would add a device line)
        f"tracking: {{run_dir: {tmp_path / 'runs'}, wandb: {{mode: disabled}}}}\n"
    )
    return path


def test_validate_refuses_an_impossible_num_envs_in_one_line(tmp_path: Path, capsys) -> None:
    path = _huge_config(tmp_path)
    for extra in ([], ["--check-envs"]):
        assert main(["validate", *extra, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith(f"{path}:3: tasks[0].num_envs = {HUGE}")
        assert "GB of host memory" in err[0] and "is available" in err[0]


def test_skipping_the_check_lets_validate_pass(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv(preflight.SKIP_ENV, "1")
    assert main(["validate", str(_huge_config(tmp_path))]) == 0


def test_validate_with_envs_uses_the_real_spaces(tmp_path: Path, capsys, monkeypatch) -> None:
    """16 CartPole copies fit in 4 GB; the same with room for 1 MB is refused only once the
    spaces are known (the lower bound fits)."""
    path = tmp_path / "small.yaml"
    path.write_text(
        "tasks:\n  - env: gymnasium/CartPole-v1\nactors: {mode: serial}\nlearner: {device: cpu}\n"
    )
    monkeypatch.setattr(preflight, "host_available", lambda: 4 * GiB)
    assert main(["validate", "--check-envs", str(path)]) == 0
    capsys.readouterr()
    cfg = _cfg(actors={"mode": "serial"}, learner={"device": "cpu"})
    bound = sum(p.nbytes for p in me.estimate(cfg, preflight.bound_sizes(cfg), False))
    monkeypatch.setattr(preflight, "host_available", lambda: int(bound / me.HEADROOM) + 1)
    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--check-envs", str(path)]) == 2
    assert "learner batch" in capsys.readouterr().err


def test_trainer_refuses_before_building_any_env(tmp_path: Path, monkeypatch) -> None:
    from mtrl.plugins import EnvSpec
    from mtrl.train.trainer import Trainer

    def no_big_env(self, num_envs, seed=0, **kw):
        raise AssertionError(f"built {num_envs} envs before the memory check")

    monkeypatch.setattr(EnvSpec, "build", no_big_env)
    cfg = _cfg(
        tasks=[{"env": "gymnasium/CartPole-v1", "num_envs": HUGE}], actors={"mode": "serial"}
    )
    with pytest.raises(preflight.MemoryCheckError, match=f"tasks\\[0\\].num_envs = {HUGE}"):
        Trainer(cfg, write_run_dir=False, console=False)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (8 * GiB, 8 * GiB))  # a regression cannot eat the box


def test_train_refuses_an_impossible_num_envs_with_exit_2(tmp_path: Path) -> None:
    path = _huge_config(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", "train", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_limit_memory,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: tasks[0].num_envs = {HUGE}"), err
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()


def test_an_unsupported_space_keeps_the_lower_bound() -> None:
    """The trainer's own check names the part; the estimate must not fail first."""
    (size,) = preflight.task_sizes(_cfg(), [(spaces.Box(0, 1, (3,), np.float32), spaces.Text(5))])
    assert size == preflight.bound_sizes(_cfg())[0]
