"""Learning rules offered by plugins: the registrar hooks receive and the registry of all.

What a learning rule is (the :class:`mtrl.learner.protocol.Learner` protocol) is defined in
:mod:`mtrl.learner`; the shared mechanics are :mod:`mtrl.plugins.named_registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mtrl.errors import UserError
from mtrl.plugins.named_registry import NamedRegistrar, NamedRegistry

#: The ways a learner can be spread over torchrun replicas (``learner.parallel``): plain data
#: parallel (``data_parallel > 1``), the two model-parallel modes, and ``loose_sync``: replicas
#: that update alone between synchronisations (``sync: local_sgd | diloco | async``; the
#: learner then implements :class:`mtrl.learner.replica_state.Reconcilable`).
PARALLEL_MODES = ("data_parallel", "task_sharded", "fsdp", "loose_sync")


class UnknownAlgorithmError(UserError, KeyError):
    """A learning-rule name that no loaded plugin registered."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class AlgorithmSpec:
    """One learning rule: ``factory(model, cfg, task_names, ctx, device, lr_scales) ->
    Learner``, the parallel modes it supports, who offers it, and ``prepare_model``: what the
    rule changes in a freshly built model to act (SAC's squashed-Gaussian heads), so that
    ``mtrl eval`` rebuilds the model its checkpoints hold (None: the model as it is built)."""

    name: str
    factory: Callable[..., Any]
    plugin: str
    description: str = ""
    parallel: frozenset[str] = frozenset()
    prepare_model: Callable[[Any], None] | None = None


class AlgorithmRegistry(NamedRegistry[AlgorithmSpec]):
    """Learning-rule names of every loaded plugin (one flat namespace, first wins)."""

    noun = "learning rule"
    unknown_error = UnknownAlgorithmError

    def parallel_support(self) -> dict[str, list[str]]:
        """Name -> the parallel modes it supports (the config's validation context)."""
        return {spec.name: sorted(spec.parallel) for spec in self}


class AlgorithmRegistrar(NamedRegistrar[AlgorithmSpec]):
    """Collects one plugin's learning rules; malformed registrations become ``problems``."""

    noun = "learning rule"
    what = "factory"
    arguments = ("model", "cfg", "task_names", "ctx", "device", "lr_scales")

    def make_spec(self, name: str, obj: Callable[..., Any], description: str) -> AlgorithmSpec:
        return AlgorithmSpec(name, obj, self.plugin, description)

    def algorithm(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        parallel: Iterable[str] = (),
        description: str = "",
        prepare_model: Callable[[Any], None] | None = None,
    ) -> None:
        """Register one learning rule (see
        :func:`mtrl.plugins.hookspecs.mtrl_register_algorithms`)."""
        modes = frozenset(parallel) if not isinstance(parallel, str) else frozenset([parallel])
        unknown = sorted(modes - set(PARALLEL_MODES))
        if unknown:
            self.problems.append(
                f"{self.noun} {name!r}: unknown parallel mode(s) {unknown}; "
                f"known: {', '.join(PARALLEL_MODES)}"
            )
            return
        before = len(self.specs)
        self._register(name, factory, description)
        if len(self.specs) > before:
            spec = self.specs[-1]
            self.specs[-1] = AlgorithmSpec(
                spec.name, spec.factory, spec.plugin, spec.description, modes, prepare_model
            )

    __call__ = algorithm
