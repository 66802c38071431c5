"""Device names, torchrun's environment and the learner factory, in one process."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parallel_scenarios import NAMES, SPACES, all_batches, build_model, learner_config

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.algorithms.impala.parallel import make_impala_learner
from mtrl.algorithms.impala.sharding import RemoteTask, assign_tasks, shard_tasks
from mtrl.config import LearnerConfig
from mtrl.errors import UserError
from mtrl.learner import device as device_mod
from mtrl.learner.device import (
    Accelerator,
    DeviceError,
    auto_kind,
    resolve_device,
    xla_unavailable_reason,
)
from mtrl.learner.distributed import DistContext


def test_cpu_and_auto_resolve_here() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a GPU")
def test_cuda_without_a_gpu_says_so() -> None:
    with pytest.raises(DeviceError, match=r"sees no CUDA GPU.*use device: cpu"):
        resolve_device("cuda:1")


def test_auto_takes_the_gpu_only_when_every_replica_of_the_node_has_one() -> None:
    assert auto_kind(0) == "cpu"
    assert auto_kind(1) == auto_kind(2, 2) == auto_kind(8, 3) == "cuda"
    assert auto_kind(1, 2) == auto_kind(2, 3) == "cpu"  # NCCL: no two ranks on one GPU


def test_cuda_for_more_replicas_than_gpus_says_how_many_to_start(monkeypatch) -> None:
    """Two replicas on a one-GPU node: ``cuda`` is refused in one line; ``auto`` is the CPU."""
    monkeypatch.setattr(device_mod, "_cuda_count", lambda: 1)
    with pytest.raises(DeviceError, match=r"2 learner replicas .* 1 CUDA GPU.*--nproc 1"):
        resolve_device("cuda", local_rank=1, local_replicas=2)
    assert resolve_device("auto", local_rank=1, local_replicas=2) == torch.device("cpu")


def test_unknown_or_malformed_devices_list_the_choices() -> None:
    for name in ("tpu", "cuda:x", "cpu:0"):
        with pytest.raises(DeviceError, match=r"auto, cpu, cuda\[:N\], mps or xla\[:N\]"):
            resolve_device(name)


def test_xla_without_a_matching_torch_xla_names_the_torch_it_needs() -> None:
    if xla_unavailable_reason() is None:
        pytest.skip("torch_xla loads here; tests/xla covers the device")
    with pytest.raises(DeviceError, match=r"works only beside torch X\.Y\.x|needs torch \d"):
        resolve_device("xla:0")


def test_the_accelerator_picks_the_collective_backend_per_kind() -> None:
    assert Accelerator(torch.device("cpu")).dist_backend == "gloo"
    assert Accelerator(torch.device("cuda", 0)).dist_backend == "nccl"
    acc = Accelerator(torch.device("cpu"))
    x = torch.ones(3)
    assert acc.to_device(x) is x  # nothing to copy on the host
    acc.after_step()
    acc.synchronize()


def test_host_arrays_reach_the_cpu_without_a_copy_and_keep_their_dtype() -> None:
    """``to_device`` on the host shares the array's memory (a learner on the CPU copies
    nothing); the GPU path (pinned, non-blocking) runs in tests/gpu."""
    a = np.arange(6, dtype=np.uint8).reshape(2, 3)
    for dev in (None, "cpu", torch.device("cpu")):
        t = device_mod.to_device(a, dev)
        assert t.dtype == torch.uint8 and t.device.type == "cpu"
        a[0, 0] = 9
        assert t[0, 0] == 9  # the same memory
        a[0, 0] = 0


def test_context_reads_torchrun_variables() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    ctx = DistContext.from_env(env)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.local_world_size) == (3, 4, 1, 2)
    assert ctx.distributed and not ctx.is_main
    alone = DistContext.from_env({})
    assert not alone.distributed and alone.is_main
    with pytest.raises(UserError, match="RANK=4 not in"):
        DistContext.from_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(UserError, match="must be integers"):
        DistContext.from_env({"WORLD_SIZE": "two"})


def test_one_process_gets_a_plain_learner_and_asking_for_replicas_explains_torchrun() -> None:
    learner = make_impala_learner(build_model(), learner_config("fsdp"), NAMES, DistContext())
    assert type(learner) is ImpalaLearner
    cfg = LearnerConfig.model_validate({"parallel": {"data_parallel": 2}})
    with pytest.raises(UserError, match="torchrun --nproc-per-node 2"):
        make_impala_learner(build_model(), cfg, NAMES, DistContext())


def test_an_empty_update_is_an_error_on_one_process() -> None:
    with pytest.raises(ValueError, match="at least one TaskBatch"):
        ImpalaLearner(build_model(), learner_config(), NAMES).update([])


def test_tasks_are_balanced_by_size_and_foreign_modules_dropped() -> None:
    model = build_model()
    owners = assign_tasks(model, 2)
    assert owners[2] == 0  # the image encoder is the largest: alone on rank 0
    assert sorted(set(owners)) == [0, 1]
    assert shard_tasks(model, 2, rank=1) == owners
    assert shard_tasks(model, 2, rank=1) == owners  # idempotent
    for k, owner in enumerate(owners):
        assert isinstance(model.encoders[k], RemoteTask) == (owner != 1)
    with pytest.raises(RuntimeError, match="task 2's encoder lives on rank 0"):
        model.embed(2, all_batches(0)[2].obs)
    assert len(SPACES) == len(owners)
