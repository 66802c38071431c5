"""A plain-PyTorch multi-task SAC gradient step, written the way CleanRL writes SAC, beside
mtrl's on the same shapes.

The reference is Meta-World's MT-SAC baseline in CleanRL's style: one network per role over the
observation and the task's one-hot, a head per task on top (the multi-head MT-SAC of Yu et al.
2019), twin critics, a learned temperature per task, plain ``torch.optim.Adam`` (CleanRL's),
Polyak-averaged target critics; one script, no framework. Its batch is drawn uniformly from a
replay of preallocated tensors per task (CleanRL draws from SB3's numpy buffer; a tensor index
is the cheaper of the two, so the reference is not handicapped by its draw).

Shapes follow the mtrl config's: observation and action sizes (``--box-spaces``, Meta-World's
``39:4`` by default), ``learner.sac.batch_size`` rows split evenly over the tasks, each network
as deep as mtrl's: ``encoder_layers`` layers of ``encoder_dim`` then the torso's widths
(``configs/mt10.yaml``: two of 128, then 128 and 128), ReLU.
mtrl's step is ``benchmarks/learner_update.py``'s on the same config; both in this process, one
torch thread, in interleaved rounds (the median of each reported), with each step's FLOPs.

    .venv/bin/python benchmarks/peers/mtsac_reference.py configs/mt10.yaml --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, write_result  # noqa: E402
from learner_update import measure  # noqa: E402

from mtrl.algorithms.sac.settings import SacSettings  # noqa: E402
from mtrl.config.loading import load_config  # noqa: E402

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # CleanRL's SAC


def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class Actor(nn.Module):
    """One network over observation and one-hot task; a mean and log-std head per task."""

    def __init__(self, obs: int, act: int, tasks: int, hidden: list[int]) -> None:
        super().__init__()
        self.act, self.tasks = act, tasks
        self.body = mlp([obs + tasks, *hidden])
        self.heads = nn.Linear(hidden[-1], tasks * 2 * act)

    def forward(self, x: torch.Tensor, task: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.body(x))
        out = self.heads(h).view(-1, self.tasks, 2 * self.act)
        out = out.gather(1, task.view(-1, 1, 1).expand(-1, 1, 2 * self.act)).squeeze(1)
        mean, log_std = out.chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        return mean, log_std

    def sample(self, x: torch.Tensor, task: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self(x, task)
        std = log_std.exp()
        normal = torch.distributions.Normal(mean, std)
        u = normal.rsample()
        a = torch.tanh(u)
        logp = normal.log_prob(u) - torch.log(1 - a.pow(2) + 1e-6)
        return a, logp.sum(1)


class Critic(nn.Module):
    """One Q network over observation, one-hot task and action; a value head per task."""

    def __init__(self, obs: int, act: int, tasks: int, hidden: list[int]) -> None:
        super().__init__()
        self.body = mlp([obs + tasks + act, *hidden])
        self.heads = nn.Linear(hidden[-1], tasks)

    def forward(self, x: torch.Tensor, a: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.body(torch.cat([x, a], 1)))
        return self.heads(h).gather(1, task.view(-1, 1)).squeeze(1)


class Reference:
    """The reference's state and its gradient step (CleanRL's update, every step)."""

    def __init__(
        self, obs: int, act: int, tasks: int, hidden: list[int], batch: int, capacity: int
    ) -> None:
        torch.manual_seed(0)
        self.obs, self.act, self.tasks, self.batch = obs, act, tasks, batch
        self.actor = Actor(obs, act, tasks, hidden)
        self.q1, self.q2 = Critic(obs, act, tasks, hidden), Critic(obs, act, tasks, hidden)
        self.t1, self.t2 = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.q_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=3e-4)
        self.pi_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.log_alpha = torch.zeros(tasks, requires_grad=True)
        self.a_opt = torch.optim.Adam([self.log_alpha], lr=3e-4)
        self.target_entropy = -float(act)
        g = torch.Generator().manual_seed(1)
        n = tasks * capacity
        self.data = {
            "obs": torch.randn(n, obs, generator=g),
            "next_obs": torch.randn(n, obs, generator=g),
            "actions": torch.rand(n, act, generator=g) * 2 - 1,
            "rewards": torch.randn(n, generator=g),
            "dones": (torch.rand(n, generator=g) < 0.01).float(),
        }
        self.capacity = capacity
        self.eye = torch.eye(tasks)

    def draw(self) -> dict[str, torch.Tensor]:
        per = self.batch // self.tasks
        task = torch.arange(self.tasks).repeat_interleave(per)
        idx = task * self.capacity + torch.randint(self.capacity, (len(task),))
        out = {k: v[idx] for k, v in self.data.items()}
        out["task"] = task
        return out

    def step(self) -> None:
        b = self.draw()
        one_hot = self.eye[b["task"]]
        x, nx = torch.cat([b["obs"], one_hot], 1), torch.cat([b["next_obs"], one_hot], 1)
        alpha = self.log_alpha.exp().detach()[b["task"]]
        with torch.no_grad():
            na, nlogp = self.actor.sample(nx, b["task"])
            tq = torch.min(self.t1(nx, na, b["task"]), self.t2(nx, na, b["task"]))
            y = b["rewards"] + (1 - b["dones"]) * 0.99 * (tq - alpha * nlogp)
        q_loss = F.mse_loss(self.q1(x, b["actions"], b["task"]), y) + F.mse_loss(
            self.q2(x, b["actions"], b["task"]), y
        )
        self.q_opt.zero_grad()
        q_loss.backward()
        self.q_opt.step()
        a, logp = self.actor.sample(x, b["task"])
        q = torch.min(self.q1(x, a, b["task"]), self.q2(x, a, b["task"]))
        pi_loss = (alpha * logp - q).mean()
        self.pi_opt.zero_grad()
        pi_loss.backward()
        self.pi_opt.step()
        a_loss = (-self.log_alpha[b["task"]] * (logp.detach() + self.target_entropy)).mean()
        self.a_opt.zero_grad()
        a_loss.backward()
        self.a_opt.step()
        with torch.no_grad():
            for net, target in ((self.q1, self.t1), (self.q2, self.t2)):
                for p, tp in zip(net.parameters(), target.parameters(), strict=True):
                    tp.lerp_(p, 0.005)


def time_reference(ref: Reference, steps: int) -> float:
    """Milliseconds per gradient step over ``steps`` steps (after 5 warm-up steps)."""
    for _ in range(5):
        ref.step()
    start = time.perf_counter()
    for _ in range(steps):
        ref.step()
    return (time.perf_counter() - start) / steps * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--box-spaces", default="39:4", metavar="OBS:ACT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100, help="reference steps per round")
    ap.add_argument("--updates", type=int, default=3, help="mtrl updates per round")
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(args.config)
    obs, act = (int(x) for x in args.box_spaces.split(":"))
    model = cfg.learner.model  # the depth mtrl's networks have: encoder layers, then torso
    hidden = [model.encoder_dim] * model.encoder_layers + list(model.torso)
    sac = cfg.learner.settings("sac", SacSettings)
    ref = Reference(obs, act, len(cfg.tasks), hidden, sac.batch_size, 10_000)
    with FlopCounterMode(display=False) as counter:
        ref.step()
    ref_gflop = counter.get_total_flops() / 1e9
    runs: dict[str, list[float]] = {"reference": [], "mtrl": []}
    mtrl_anatomy: dict[str, Any] = {}
    for round_ in range(args.rounds):
        runs["reference"].append(time_reference(ref, args.steps))
        result = measure(
            args.config, args.updates, "cpu", anatomy=round_ == 0, box_spaces=args.box_spaces
        )
        runs["mtrl"].append(result["ms_per_gradient_step"])
        mtrl_anatomy = result.get("anatomy", mtrl_anatomy)
        print(
            f"round {round_ + 1}: reference {runs['reference'][-1]:.2f} ms, "
            f"mtrl {runs['mtrl'][-1]:.2f} ms per gradient step",
            flush=True,
        )
    median = {k: float(np.median(v)) for k, v in runs.items()}
    print(
        f"reference (CleanRL-style multi-head MT-SAC, {ref_gflop:.3f} GFLOP): "
        f"{median['reference']:.2f} ms per step; mtrl ({mtrl_anatomy.get('gflop', 0):.3f} "
        f"GFLOP): {median['mtrl']:.2f} ms; "
        f"mtrl / reference {median['mtrl'] / median['reference']:.2f}x"
    )
    payload = {
        "benchmark": "mtsac_reference",
        "machine": machine(),
        "config": str(args.config),
        "box_spaces": args.box_spaces,
        "hidden": hidden,
        "batch_size": sac.batch_size,
        "ms_per_gradient_step": runs,
        "median_ms": median,
        "reference_gflop": ref_gflop,
        "mtrl_anatomy": mtrl_anatomy,
        "mtrl_over_reference": median["mtrl"] / median["reference"],
    }
    print(f"wrote {write_result(f'mtsac_reference_{args.config.stem}', payload, args.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
