"""The scheduler on a simulated cluster: a discrete-event simulation of actors, nodes and
tasks whose unroll times are drawn from models (:mod:`~mtrl.scheduler.sim.tasks`), run
through the same policies and rebalancer as a real run (:mod:`~mtrl.scheduler.sim.simulator`),
with nodes that join, leave and fail (:mod:`~mtrl.scheduler.sim.nodes`).
``benchmarks/scheduler_sim.py`` and docs/SCHEDULER.md use it; a training run never does."""
