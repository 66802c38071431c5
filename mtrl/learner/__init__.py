"""The learner: multi-task model, V-trace, PopArt, loss, and parallelism."""
