"""The rebalancer shares the budget among the tasks whose actors this process runs."""

from __future__ import annotations

from mtrl.config import parse_config
from mtrl.plugins import get_plugins
from mtrl.scheduler import Rebalancer

CONFIG = """
tasks:
  - {env: tensor/CartPole-v1, name: on-device, anakin: true}
  - {env: gymnasium/CartPole-v1, name: a}
  - {env: gymnasium/Acrobot-v1, name: b}
scheduler: {policy: balanced, num_actors: 6}
"""


def test_tasks_without_actors_here_get_no_slots_and_no_share() -> None:
    reb = Rebalancer(parse_config(CONFIG), get_plugins(), actor_tasks=[1, 2])
    first = reb.initial()
    assert first.counts == [0, 3, 3], "all 6 slots go to the two actor tasks"
    assert first.shares == [None, 0.5, 0.5]
    assert reb.budget.slots == 6


def test_by_default_every_task_shares_the_budget() -> None:
    first = Rebalancer(parse_config(CONFIG), get_plugins()).initial()
    assert first.counts == [2, 2, 2]
