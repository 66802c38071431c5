"""Tests for mtrl.algorithms.impala.vtrace against per-element references of the IMPALA formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mtrl.algorithms.impala.vtrace import vtrace

GAMMA = 0.9


def _random_unroll(T: int, B: int, seed: int, p_term: float = 0.1, p_trunc: float = 0.1):
    """Random off-policy unroll as float64 numpy arrays plus raw done flags."""
    rng = np.random.default_rng(seed)
    return dict(
        behaviour_logp=rng.normal(-1.0, 0.5, (T, B)),
        target_logp=rng.normal(-1.0, 0.5, (T, B)),
        rewards=rng.normal(0.0, 1.0, (T, B)),
        values=rng.normal(0.0, 1.0, (T, B)),
        bootstrap_value=rng.normal(0.0, 1.0, (B,)),
        terminated=rng.random((T, B)) < p_term,
        truncated=rng.random((T, B)) < p_trunc,
    )


def _call(u: dict, dtype=torch.float64, gamma: float = GAMMA, **kw):
    t = {k: torch.as_tensor(v) for k, v in u.items()}
    return vtrace(
        behaviour_logp=t["behaviour_logp"].to(dtype),
        target_logp=t["target_logp"].to(dtype),
        rewards=t["rewards"].to(dtype),
        values=t["values"].to(dtype),
        bootstrap_value=t["bootstrap_value"].to(dtype),
        discounts=(gamma * (1.0 - t["terminated"].double())).to(dtype),
        truncated=t["truncated"],
        **kw,
    )


def _reference(u: dict, gamma: float, rho_bar: float, c_bar: float, lam: float, pg_rho_bar):
    """IMPALA eq. 1 as an explicit sum, element by element, from the raw done flags.

    v_s = V_s + Σ_{t=s}^{e} γ^{t-s} (Π_{i=s}^{t-1} c_i) δ_t, where e is the last step of the
    episode inside the unroll (the first terminated or truncated step at or after s, or T-1).
    δ_t bootstraps from V_{t+1} unless step t terminated.
    """
    T, B = u["values"].shape
    rho = np.exp(u["target_logp"] - u["behaviour_logp"])
    V = u["values"]
    V_next = np.concatenate([V[1:], u["bootstrap_value"][None]], axis=0)
    term, trunc, r = u["terminated"], u["truncated"], u["rewards"]
    pg_rho_bar = rho_bar if pg_rho_bar is None else pg_rho_bar

    def delta(t: int, b: int) -> float:
        bootstrap = 0.0 if term[t, b] else gamma * V_next[t, b]
        return min(rho_bar, rho[t, b]) * (r[t, b] + bootstrap - V[t, b])

    vs = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            total = 0.0
            for t in range(s, T):
                coef = gamma ** (t - s)
                for i in range(s, t):
                    coef *= lam * min(c_bar, rho[i, b])
                total += coef * delta(t, b)
                if term[t, b] or trunc[t, b]:
                    break
            vs[s, b] = V[s, b] + total

    pg = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            if term[s, b]:
                q = 0.0
            elif trunc[s, b]:
                q = gamma * V_next[s, b]
            else:
                q = gamma * (vs[s + 1, b] if s + 1 < T else u["bootstrap_value"][b])
            pg[s, b] = min(pg_rho_bar, rho[s, b]) * (r[s, b] + q - V[s, b])
    return vs, pg, rho


@pytest.mark.parametrize("T,B", [(1, 1), (5, 3), (20, 7), (64, 2)])
@pytest.mark.parametrize(
    "rho_bar,c_bar,lam,pg_rho_bar",
    [
        (1.0, 1.0, 1.0, None),
        (0.8, 0.5, 1.0, None),
        (2.0, 1.5, 0.9, 1.3),
        (math.inf, 1.0, 0.7, None),
    ],
)
def test_matches_per_element_reference(T, B, rho_bar, c_bar, lam, pg_rho_bar):
    u = _random_unroll(T, B, seed=T * 100 + B)
    out = _call(u, rho_bar=rho_bar, c_bar=c_bar, lam=lam, pg_rho_bar=pg_rho_bar)
    vs, pg, rho = _reference(u, GAMMA, rho_bar, c_bar, lam, pg_rho_bar)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.pg_advantages.numpy(), pg, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.rhos.numpy(), rho, rtol=1e-12)


def test_reference_sees_the_trace_cut():
    # Guards the reference test: the random unrolls do contain both kinds of episode end, and
    # ignoring truncation (treating it as "no done") gives different targets.
    u = _random_unroll(20, 7, seed=2007, p_term=0.1, p_trunc=0.1)
    assert u["terminated"].any() and u["truncated"].any()
    out = _call(u)
    no_trunc = dict(u, truncated=np.zeros_like(u["truncated"]))
    assert not np.allclose(out.vs.numpy(), _reference(no_trunc, GAMMA, 1.0, 1.0, 1.0, None)[0])


def test_float32_close_to_float64_reference():
    u = _random_unroll(32, 16, seed=7)
    out = _call(u, dtype=torch.float32, rho_bar=1.0, c_bar=1.0, lam=0.95)
    assert out.vs.dtype == torch.float32
    vs, pg, _ = _reference(u, GAMMA, 1.0, 1.0, 0.95, None)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), pg, rtol=1e-4, atol=1e-4)


def test_on_policy_no_dones_is_n_step_return():
    T, B = 10, 4
    u = _random_unroll(T, B, seed=3, p_term=0.0, p_trunc=0.0)
    u["target_logp"] = u["behaviour_logp"].copy()
    out = _call(u)
    r, boot = u["rewards"], u["bootstrap_value"]
    for t in range(T):
        expected = sum(GAMMA ** (k - t) * r[k] for k in range(t, T)) + GAMMA ** (T - t) * boot
        np.testing.assert_allclose(out.vs[t].numpy(), expected, rtol=1e-12, atol=1e-12)
    next_vs = np.concatenate([out.vs[1:].numpy(), boot[None]], axis=0)
    np.testing.assert_allclose(
        out.pg_advantages.numpy(), r + GAMMA * next_vs - u["values"], rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(out.rhos.numpy(), 1.0)


def _hand_unroll(done_at: int, kind: str) -> dict:
    T = 6
    u = dict(
        behaviour_logp=np.full((T, 1), -0.5),
        target_logp=np.full((T, 1), -0.5),
        rewards=np.arange(1.0, T + 1.0)[:, None],  # 1, 2, 3, ...
        values=np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])[:, None],
        bootstrap_value=np.array([70.0]),
        terminated=np.zeros((T, 1), dtype=bool),
        truncated=np.zeros((T, 1), dtype=bool),
    )
    u[kind][done_at, 0] = True
    return u


def test_termination_stops_the_return():
    out = _call(_hand_unroll(2, "terminated"))
    g = GAMMA
    assert out.vs[0, 0].item() == pytest.approx(1 + g * 2 + g**2 * 3, abs=1e-12)
    assert out.vs[2, 0].item() == pytest.approx(3.0, abs=1e-12)
    assert out.pg_advantages[2, 0].item() == pytest.approx(3.0 - 30.0, abs=1e-12)


def test_truncation_bootstraps_from_final_observation_value():
    out = _call(_hand_unroll(2, "truncated"))
    g = GAMMA
    # x_3 is the final observation; V(x_3) = 40.
    assert out.vs[0, 0].item() == pytest.approx(1 + g * 2 + g**2 * 3 + g**3 * 40, abs=1e-12)
    assert out.vs[2, 0].item() == pytest.approx(3 + g * 40, abs=1e-12)
    assert out.pg_advantages[2, 0].item() == pytest.approx(3 + g * 40 - 30, abs=1e-12)


@pytest.mark.parametrize("kind", ["terminated", "truncated"])
def test_next_episode_does_not_leak_back(kind):
    u = _hand_unroll(2, kind)
    base = _call(u)
    # Perturb everything that belongs to the reset step and the next episode.
    v = dict(u, rewards=u["rewards"].copy(), values=u["values"].copy())
    v["rewards"][3:] += 100.0
    v["values"][4:] -= 100.0
    v["bootstrap_value"] = u["bootstrap_value"] + 100.0
    v["target_logp"] = u["target_logp"].copy()
    v["target_logp"][3:] += 2.0
    out = _call(v)
    torch.testing.assert_close(out.vs[:3], base.vs[:3], rtol=0, atol=0)
    torch.testing.assert_close(out.pg_advantages[:3], base.pg_advantages[:3], rtol=0, atol=0)
    assert not torch.equal(out.vs[3:], base.vs[3:])  # the perturbation did reach later rows


@pytest.mark.parametrize("kw", [dict(c_bar=0.0), dict(lam=0.0)])
def test_no_trace_gives_one_step_td_targets(kw):
    u = _random_unroll(12, 5, seed=11)
    out = _call(u, rho_bar=1.0, **kw)
    rho = np.exp(u["target_logp"] - u["behaviour_logp"])
    V = u["values"]
    V_next = np.concatenate([V[1:], u["bootstrap_value"][None]], axis=0)
    disc = GAMMA * (1.0 - u["terminated"])
    expected = V + np.minimum(1.0, rho) * (u["rewards"] + disc * V_next - V)
    np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_outputs_are_detached():
    u = _random_unroll(4, 3, seed=5)
    t = {k: torch.as_tensor(v) for k, v in u.items()}
    values = t["values"].clone().requires_grad_(True)
    target_logp = t["target_logp"].clone().requires_grad_(True)
    out = vtrace(
        behaviour_logp=t["behaviour_logp"],
        target_logp=target_logp,
        rewards=t["rewards"],
        values=values,
        bootstrap_value=t["bootstrap_value"],
        discounts=GAMMA * (1.0 - t["terminated"].double()),
        truncated=t["truncated"].double(),
    )
    assert not any(x.requires_grad for x in out)


def _good_kwargs(T: int = 4, B: int = 3) -> dict:
    z = torch.zeros(T, B)
    return dict(
        behaviour_logp=z,
        target_logp=z,
        rewards=z,
        values=z,
        bootstrap_value=torch.zeros(B),
        discounts=torch.full((T, B), GAMMA),
        truncated=torch.zeros(T, B, dtype=torch.bool),
    )


@pytest.mark.parametrize(
    "name,bad",
    [
        ("behaviour_logp", torch.zeros(4, 2)),
        ("target_logp", torch.zeros(3, 3)),
        ("rewards", torch.zeros(4, 3, dtype=torch.float64)),
        ("discounts", torch.zeros(4)),
        ("truncated", torch.zeros(4, 3, dtype=torch.int64)),
        ("truncated", torch.zeros(5, 3, dtype=torch.bool)),
        ("bootstrap_value", torch.zeros(4, 3)),
        ("bootstrap_value", torch.zeros(3, dtype=torch.float64)),
        ("values", torch.zeros(4, 3, 1)),
        ("values", torch.zeros(4, 3, dtype=torch.int64)),
    ],
)
def test_bad_input_names_the_argument(name, bad):
    kwargs = _good_kwargs()
    vtrace(**kwargs)  # the good baseline passes
    kwargs[name] = bad
    with pytest.raises(ValueError, match=name):
        vtrace(**kwargs)


@pytest.mark.parametrize(
    "name,value", [("rho_bar", 0.0), ("c_bar", -1.0), ("lam", 1.5), ("pg_rho_bar", -0.1)]
)
def test_bad_hyperparameter_names_it(name, value):
    with pytest.raises(ValueError, match=name):
        vtrace(**_good_kwargs(), **{name: value})
