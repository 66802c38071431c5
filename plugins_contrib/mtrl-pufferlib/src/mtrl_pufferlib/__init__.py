"""PufferLib's Ocean envs (C, vectorised in place) as mtrl batch envs: ``pufferlib/<name>``."""
