"""Combining per-task gradients of the shared torso (``learner.multitask.gradients``): PCGrad
projects conflicting gradients exactly, CAGrad solves the authors' problem as their code does,
and the learner replaces only the shared parameters' gradients by the combination of the
tasks' own gradients (measured apart, one learner per task)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import optimize

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.config import LearnerConfig, parse_config
from mtrl.errors import ConfigError
from mtrl.learner.gradient_combination import cagrad, cagrad_weights, combine, pcgrad
from mtrl.learner.model import MultiTaskModel
from mtrl.train.trainer import Trainer
from tests.two_task_batches import SPACES, two_task_batch


def test_pcgrad_projects_two_conflicting_gradients_onto_each_others_normal_plane() -> None:
    # g1·g2 = -1 < 0: g1 - (g1·g2/|g2|²) g2 = (0.5, 0.5); g2 - (g2·g1/|g1|²) g1 = (0, 1).
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    torch.testing.assert_close(pcgrad(g), torch.tensor([0.5, 1.5]))


def test_pcgrad_leaves_agreeing_gradients_and_absent_tasks_alone() -> None:
    g = torch.tensor([[1.0, 2.0, 0.0], [0.5, 0.1, 3.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(pcgrad(g), g.sum(dim=0))


def test_pcgrad_removes_every_conflict_of_two_tasks() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        g = torch.tensor(rng.normal(size=(2, 7)))
        out = pcgrad(g)
        own = [g[i].clone() for i in range(2)]
        for i, j in ((0, 1), (1, 0)):
            dot = torch.dot(own[i], g[j])
            if dot < 0:
                own[i] = own[i] - dot / g[j].dot(g[j]) * g[j]
                assert float(torch.dot(own[i], g[j])) == pytest.approx(0.0, abs=1e-9)
        torch.testing.assert_close(out, own[0] + own[1])


def test_pcgrad_task_order_comes_from_the_generator() -> None:
    g = torch.tensor(np.random.default_rng(1).normal(size=(4, 6)))
    a = pcgrad(g, torch.Generator().manual_seed(3))
    b = pcgrad(g, torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cagrad_with_c_zero_is_the_sum_and_one_task_is_its_own_gradient() -> None:
    g = torch.tensor(np.random.default_rng(2).normal(size=(3, 5)))
    torch.testing.assert_close(cagrad(g, 0.0), g.sum(dim=0))
    one = torch.zeros(3, 5, dtype=g.dtype)
    one[1] = g[1]
    torch.testing.assert_close(cagrad(one, 0.4), g[1])


@pytest.mark.parametrize("c", [0.2, 0.4, 1.0])
def test_cagrad_of_two_orthogonal_equal_gradients_has_the_closed_form(c: float) -> None:
    # w = (1/2, 1/2) by symmetry, so g_w = g0 and d = g0 (1 + c) / (1 + c²); times K = 2.
    g = torch.eye(2, dtype=torch.float64)
    expected = torch.full((2,), (1 + c) / (1 + c * c), dtype=torch.float64)
    torch.testing.assert_close(cagrad(g, c), expected, rtol=1e-5, atol=1e-7)


def _authors_cagrad(grads: torch.Tensor, alpha: float) -> torch.Tensor:
    """Liu et al.'s ``cagrad`` (their MTRL code, rescale=1), with grads as rows here."""
    gg = (grads @ grads.T).numpy()
    k = gg.shape[0]
    g0_norm = np.sqrt(gg.mean() + 1e-8)
    x_start = np.ones(k) / k
    c = alpha * g0_norm + 1e-8

    def objfn(x: np.ndarray) -> float:
        return float(x @ gg @ x_start + c * np.sqrt(x @ gg @ x + 1e-8))

    res = optimize.minimize(
        objfn,
        x_start,
        bounds=[(0, 1)] * k,
        constraints=({"type": "eq", "fun": lambda x: 1 - sum(x)},),
    )
    gw = torch.as_tensor(res.x) @ grads
    g = grads.mean(dim=0) + c / (gw.norm() + 1e-8) * gw
    return g / (1 + alpha**2)


def test_cagrad_matches_the_authors_code_on_conflicting_gradients() -> None:
    rng = np.random.default_rng(3)
    for trial in range(40):
        k = int(rng.integers(2, 6))
        g = torch.tensor(rng.normal(size=(k, 12)))
        g[1] = -0.7 * g[0] + 0.3 * g[1]  # a conflict
        alpha = float(rng.choice([0.2, 0.4, 0.5]))
        ours, theirs = cagrad(g, alpha) / k, _authors_cagrad(g, alpha)
        # Their solver stops at SciPy's default tolerance: agree to 0.1 % of the update's size.
        assert float((ours - theirs).norm()) <= 1e-3 * float(theirs.norm()), trial


def test_cagrad_weights_reach_the_optimum_where_the_authors_solver_does_not() -> None:
    """Gradients of very different sizes: SLSQP on the raw problem stops early; on the
    normalised one it reaches what a long projected-gradient descent finds."""
    rng = np.random.default_rng(4)
    for _ in range(15):
        k = int(rng.integers(2, 6))
        g = rng.normal(size=(k, 20)) * rng.uniform(0.01, 100, size=(k, 1))
        gram = g @ g.T
        c = 0.4
        b = np.full(k, 1 / k)
        a = gram / (np.trace(gram) / k)
        scale = c * np.sqrt(b @ a @ b)

        def f(w: np.ndarray, a: np.ndarray = a, b: np.ndarray = b, scale: float = scale) -> float:
            return float(w @ a @ b + scale * np.sqrt(max(w @ a @ w, 0.0)))

        w = b.copy()
        best = f(w)
        lip = np.linalg.eigvalsh(a).max() * (1 + scale)
        for t in range(20000):
            aw = a @ w
            grad = a @ b + scale * aw / np.sqrt(max(w @ aw, 1e-12))
            w = _project_to_simplex(w - grad / (lip * np.sqrt(t + 1)))
            best = min(best, f(w))
        ours = cagrad_weights(torch.tensor(gram), c).numpy()
        assert f(ours) <= best + 1e-6 * abs(best) + 1e-9


def _project_to_simplex(v: np.ndarray) -> np.ndarray:
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    rho = np.nonzero(u * np.arange(1, len(v) + 1) > css - 1)[0][-1]
    return np.maximum(v - (css[rho] - 1) / (rho + 1.0), 0)


def test_cagrad_helps_the_worst_task_more_than_the_mean_does() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        g = torch.tensor(rng.normal(size=(3, 8)))
        g[2] = -0.9 * g[0] + 0.2 * g[2]
        d = cagrad(g, 0.5)
        assert float((g @ d).min()) >= float((g @ g.sum(dim=0)).min()) - 1e-9


def test_an_unknown_combination_is_named() -> None:
    with pytest.raises(ValueError, match="unknown gradient combination 'mgda'"):
        combine("mgda", torch.zeros(2, 3))


# -- in the learner ------------------------------------------------------------------------------


def _learner(gradients: str, tasks: list[int]) -> ImpalaLearner:
    torch.manual_seed(0)
    cfg = LearnerConfig.model_validate(
        {
            "model": {"encoder_dim": 16, "torso": [16, 16]},
            "max_grad_norm": 1e9,  # no clip: the raw gradients are compared
            "multitask": {"gradients": gradients, "cagrad_c": 0.5},
        }
    )
    model = MultiTaskModel([SPACES[k] for k in tasks], cfg.model)
    return ImpalaLearner(model, cfg, [f"t{k}" for k in tasks])


def _grads(learner: ImpalaLearner) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in learner.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("how", ["pcgrad", "cagrad"])
def test_the_learner_combines_the_tasks_own_torso_gradients(how: str) -> None:
    # Their torso gradients conflict.
    batches = [two_task_batch(0, 1.0, 10), two_task_batch(1, 30.0, 110)]
    total = sum(b.num_samples for b in batches)
    plain = _learner("sum", [0, 1])
    plain.update(batches)
    joint = _learner(how, [0, 1])
    joint.update(batches)
    # Each task's own gradient, from a learner (same start) that sees its batch alone: its
    # loss is over its own samples, so rescale to the joint batch's count.
    names = [f"torso.{n}" for n, _ in joint.model.torso.named_parameters()]
    rows = []
    for k in (0, 1):
        alone = _learner("sum", [0, 1])
        alone.update([batches[k]])
        g = _grads(alone)
        own = torch.cat([g[n].reshape(-1) for n in names])
        rows.append(own * (batches[k].num_samples / total))
    grads = torch.stack(rows)
    assert float(grads[0] @ grads[1]) < 0  # guards the test: there is a conflict to resolve
    expected = combine(how, grads, 0.5, torch.Generator().manual_seed(0))
    got = torch.cat([p.grad.reshape(-1) for p in joint.model.torso.parameters()])
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    # The combination differs from the plain sum ...
    plain_torso = torch.cat([p.grad.reshape(-1) for p in plain.model.torso.parameters()])
    torch.testing.assert_close(plain_torso, grads.sum(dim=0), rtol=1e-4, atol=1e-6)
    assert not torch.allclose(got, plain_torso, rtol=1e-3, atol=1e-6)
    # ... and every other parameter keeps the plain gradient.
    torso = {f"torso.{n}" for n, _ in joint.model.torso.named_parameters()}
    for name, g in _grads(plain).items():
        if name not in torso:
            torch.testing.assert_close(_grads(joint)[name], g, rtol=1e-5, atol=1e-7)


def test_the_learner_reports_torso_shares_from_the_per_task_gradients() -> None:
    learner = _learner("pcgrad", [0, 1])
    metrics = learner.update([two_task_batch(0, 1.0, 10), two_task_batch(1, 30.0, 11)])
    shares = [metrics[f"learner/t{k}/torso_grad_share"] for k in (0, 1)]
    assert sum(shares) == pytest.approx(1.0) and min(shares) > 0


@pytest.mark.parametrize(
    "learner, says",
    [
        (
            "{parallel: {data_parallel: 2, model_parallel: fsdp}, multitask: {gradients: cagrad}}",
            "model_parallel: fsdp splits over ranks",
        ),
        ("{multitask: {gradients: mgda}}", "learner.multitask.gradients"),
    ],
)
def test_combinations_that_cannot_run_are_refused_in_one_line(learner: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(f"tasks: [{{env: a/b}}]\nlearner: {learner}\n", "exp.yaml")
    (line,) = err.value.problems
    assert says in line and line.startswith("exp.yaml:"), line


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["pcgrad", "cagrad"])
def test_each_combination_trains_end_to_end(how: str, tmp_path: Path) -> None:
    cfg = parse_config(
        f"""
total_env_steps: 3000
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 4}}, {{env: gymnasium/Acrobot-v1, num_envs: 4}}]
actors: {{mode: serial}}
learner: {{unroll_length: 10, batch_size: 8, diagnostics_every: 1,
          model: {{encoder_dim: 16, torso: [16]}}, multitask: {{gradients: {how}}}}}
tracking: {{console: quiet, csv: false, wandb: {{mode: disabled}}, final_eval_episodes: 0,
           run_dir: {tmp_path}, log_every_s: 0.01}}
"""
    )
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    assert result.env_steps >= 3000 and result.updates > 10
    (run_dir,) = tmp_path.iterdir()
    last = [json.loads(x) for x in (run_dir / "metrics.jsonl").open()][-1]
    assert np.isfinite(last["losses/total"])
    shares = [
        last[f"learner/gymnasium/{e}/torso_grad_share"] for e in ("CartPole-v1", "Acrobot-v1")
    ]
    assert sum(shares) == pytest.approx(1.0, abs=1e-6)
