"""A training run's orchestration: what wires the layers below it into one run.

:mod:`~mtrl.train.trainer` (the loop: unrolls in, updates out, checkpoints, logs),
:mod:`~mtrl.train.unroll_intake` (what each arriving unroll is counted as),
:mod:`~mtrl.train.unroll_queue` (the learner's side of the data mix: share gate and loss
weights), :mod:`~mtrl.train.allocation` (actors per task), :mod:`~mtrl.train.liveness` (a run
that cannot progress says why), :mod:`~mtrl.train.run_state` (what a checkpoint holds; the files:
:mod:`mtrl.checkpoint`),
:mod:`~mtrl.train.progress` (per-task results), :mod:`~mtrl.train.task_envs` (the tasks'
envs), :mod:`~mtrl.train.preflight` and :mod:`~mtrl.train.memory_estimate` (refusing a run
that cannot fit before it starts), :mod:`~mtrl.train.evaluate` and
:mod:`~mtrl.train.final_eval` (the trained agent's greedy and stochastic returns).

Above every other layer but the command line (:mod:`mtrl.cli`); nothing below imports it.
"""
