"""Two "nodes" on localhost joined by torchrun's c10d rendezvous run a data-parallel learner.

Each node is its own ``torchrun --nnodes 2 --nproc-per-node 1`` (as on two hosts, with the
same command on both); they meet at one rendezvous endpoint, get ranks 0 and 1, and must take
the same updates as one process on the whole batch.
"""

from __future__ import annotations

import pytest
import torch
from parallel_scenarios import (
    assert_matches_single_process,
    assert_ranks_identical,
    run_single_process,
)
from torchrun_launch import finish, free_port, torchrun

pytestmark = pytest.mark.slow


@pytest.mark.timeout(200)
def test_two_nodes_through_c10d_rendezvous_match_single_process(tmp_path) -> None:
    port = free_port()
    node_args = [
        "--nnodes=2",
        "--nproc-per-node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=localhost:{port}",
        "--rdzv-id=mtrl-multinode-test",
        "--max-restarts=0",
    ]
    nodes = [torchrun(node_args, tmp_path, ["none"]) for _ in range(2)]
    try:
        for node in nodes:
            finish(node, timeout=150)
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
    results = [torch.load(tmp_path / f"none_rank{r}.pt", weights_only=False) for r in range(2)]
    assert [r["world_size"] for r in results] == [2, 2]
    assert_ranks_identical(results)
    reference = run_single_process()
    for result in results:
        assert_matches_single_process(result, reference)
