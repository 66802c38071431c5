"""``learner.parallel.sync: gossip`` without pyzmq (the ``external`` extra): one line naming
the setting and the extra to install, not an ImportError's traceback from a torchrun worker."""

from __future__ import annotations

import sys

import pytest

from mtrl.errors import UserError
from mtrl.sync.gossip import GossipSync


def test_gossip_without_pyzmq_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zmq", None)  # `import zmq` raises ImportError
    needs = r"sync: gossip needs pyzmq: pip install 'mtrl\[external\]'"
    with pytest.raises(UserError, match=needs):
        GossipSync(None, None, 1)  # type: ignore[arg-type]
