"""The shared parts of every learning rule: the multi-task model (encoders, torsos, heads),
PopArt, distributions, optimiser, schedules, batches, the ``Learner`` protocol, combining the
tasks' gradients, devices and torch.distributed helpers."""
