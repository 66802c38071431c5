""":class:`ExternalSim`, the factory a plugin registers for an external env.

A plugin describes how to reach a simulation and registers it like any other env (an
:class:`ExternalSim` is the ``make`` factory)::

    register.env("heat2d", ExternalSim(
        command="{mpiexec} -n {ranks} {binary} {address}",
        defaults={"ranks": 2, "binary": "..."},
    ))

Building one sorts the task's ``env_kwargs``: the template's fields, the transport security,
``copies_per_process``, the member policy (:mod:`.members`), the member bounds of attached
codes (:mod:`.roster`) and ``step_timeout_s``; a key that is none of these is refused. Then it
runs ``prepare`` and hands all to :class:`~.env.ExternalBatchEnv`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mtrl.plugins.external.env import ExternalBatchEnv
from mtrl.plugins.external.link import SECURITY_KWARGS, check_transport
from mtrl.plugins.external.members import MemberPolicy
from mtrl.plugins.external.roster import Roster
from mtrl.plugins.external.settings import SimSettings


@dataclasses.dataclass(frozen=True)
class ExternalSim(SimSettings):
    """How to reach one simulation code; called as ``make(num_envs, seed, **env_kwargs)``.

    ``command``: a template (string, split like a shell would, or a list of arguments) whose
    ``{name}`` fields are filled from ``defaults`` updated by the task's ``env_kwargs`` and
    these built-ins: ``address`` (the ZeroMQ address mtrl bound; the simulation connects to
    it), ``num_envs`` and ``seed`` (of the process: copies and base seed it serves),
    ``python`` (this interpreter) and ``mpiexec`` (the one beside it, from the ``mpich``
    wheel, else on PATH). ``address`` instead of ``command``: attach to a simulation already
    running that bound that address (it serves the whole batch). ``members_dir`` instead:
    attach to every code that announces itself in that directory, as it comes and goes, within
    ``min_members``/``max_members`` (env_kwargs, which may set ``members_dir`` too:
    :mod:`.roster`).

    ``copies_per_process``: copies each launched process serves; None for all of them (one
    process, which steps the batch itself). ``prepare(values) -> values`` runs once per build
    before launching (e.g. to compile the code; must pickle: a module-level function).
    ``env_kwargs`` not named in ``defaults`` are an error (``TypeError``, reported by mtrl with
    the env id).

    Transport security (docs/COUPLING.md, section 2; env_kwargs may set each):
    ``server_key``, the CURVE public key of a simulation attached to over tcp://;
    ``insecure: true`` allows plain tcp:// to a non-loopback address (else refused) and
    launches tcp:// codes without CURVE; ``max_message_bytes``, the largest frame accepted.

    ``copies_per_process`` and the member policy (``member_restart``, ``member_max_restarts``,
    ``member_window_s``: :mod:`.members`) may be set by env_kwargs too.

    ``log_max_bytes``: the cap of each launched process's log (docs/COUPLING.md, section 6).
    ``env_id`` and ``declared`` (the observation and action spaces given to ``register.env``)
    are filled in by mtrl when the env is registered (:meth:`for_env`); errors then name the
    env id, and a handshake that disagrees with the declared spaces is refused.
    """

    def __call__(self, num_envs: int, seed: int = 0, **env_kwargs: Any) -> ExternalBatchEnv:
        problem = self.kwargs_problem(env_kwargs)
        if problem:
            raise TypeError(problem)
        security = {k: env_kwargs.pop(k) for k in SECURITY_KWARGS if k in env_kwargs}
        if "copies_per_process" in env_kwargs:  # one job per copy: members restart alone
            security["copies_per_process"] = env_kwargs.pop("copies_per_process")
        if security:
            return dataclasses.replace(self, **security)(num_envs, seed, **env_kwargs)
        if self.members_dir is not None:
            env_kwargs.setdefault("members_dir", self.members_dir)
        problem = self.members_problem(env_kwargs, num_envs)
        if problem:
            raise ValueError(problem)
        roster = Roster.from_kwargs(env_kwargs, num_envs)
        if roster is None:
            check_transport(
                self.env_id or "external env", self.address, self.server_key, self.insecure
            )
        timeout = float(env_kwargs.pop("step_timeout_s", self.step_timeout_s))
        members = MemberPolicy.from_kwargs(env_kwargs)
        values = {**self.defaults, **env_kwargs}
        if self.prepare is not None:
            values = self.prepare(dict(values))
        return ExternalBatchEnv(
            num_envs, seed, self, values, step_timeout_s=timeout, members=members, roster=roster
        )
