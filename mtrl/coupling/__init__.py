"""The coupling protocol between mtrl and external simulation codes, and its client libraries.

A leaf package: it imports numpy and (lazily) pyzmq, nothing else of mtrl, so a simulation
process that imports its Python client pays for no training code. The wire format is specified
in docs/COUPLING.md and mirrored by :mod:`mtrl.coupling.protocol`; the simulation side is
:mod:`mtrl.coupling.client` (Python) and ``mtrl/coupling/c/`` (C, built by
:mod:`mtrl.coupling.cbuild`). The env that drives a simulation lives in the plugin layer
(:mod:`mtrl.plugins.external`).
"""

from mtrl.coupling.protocol import PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION"]
