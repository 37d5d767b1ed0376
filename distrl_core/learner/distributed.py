"""The learner on several processes: which rows of a batch each rank trains on, the micro-batch
loss under ``DistributedDataParallel``, and the sums over ranks of the metrics and priorities.

Every rank holds the same union batch of B trajectories (rank 0 samples it and sends it to the
others: ``tasks/learner_ranks.py``) and trains on rows ``[r·B/W, (r+1)·B/W)`` of it. Whatever
spans the batch (the step and row totals the losses are weighted by, gigpo's group advantages,
the lag metrics) is computed on the union batch by every rank, so that the W-process update is
the single-process one: each rank's loss is its share of the union loss times W, DDP averages the
gradients over the W ranks (a sum of the shares), and the metrics and the per-trajectory
priorities are summed over ranks. The process group must be initialised before ``DataParallel``::

    torch.distributed.init_process_group("gloo", rank=rank, world_size=world, store=store)
    learner.parallel = DataParallel(learner.policy, rank, world)
    metrics, priorities = learner.update(union_batch)  # the same on every rank
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from distrl_core.learner.learner import MicroBatchLoss
from distrl_core.policy.model import Policy

__all__ = ["DataParallel", "batch_split_problem", "shard_rows"]


def shard_rows(size: int, rank: int, world: int) -> range:
    """Rank `rank`'s rows of a batch of `size` trajectories: equal, contiguous slices (size % world == 0)."""
    if size % world:
        raise ValueError(batch_split_problem(size, world))
    share = size // world
    return range(rank * share, (rank + 1) * share)


def batch_split_problem(batch_size: int, processes: int) -> str | None:
    """Why `batch_size` trajectories cannot be split over `processes` learner processes, or None.
    Unequal shards would differ in micro-batch counts, and DDP needs one all-reduce per rank."""
    if batch_size % processes == 0:
        return None
    fix = -(-batch_size // processes) * processes
    return (
        f"batch_size={batch_size} does not divide by learner_processes={processes}: each process "
        f"trains on batch_size/learner_processes trajectories; set batch_size to a multiple of "
        f"{processes} (e.g. {fix})"
    )


class DataParallel:
    """A rank's part in the learner's update (``Learner.parallel``): its rows, the micro-batch
    loss wrapped in DDP, and the sums over ranks."""

    def __init__(self, policy: Policy, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.device = policy.device
        cuda = policy.device.type == "cuda"
        index = (
            policy.device.index
            if policy.device.index is not None or not cuda
            else torch.cuda.current_device()
        )
        # find_unused_parameters: the actor heads are out of the loss during the critic warm-up,
        # the critics for critic-free algorithms. Buffers are not trained: synced once, at construction.
        self.loss = DistributedDataParallel(
            MicroBatchLoss(policy),
            device_ids=[index] if cuda else None,
            find_unused_parameters=True,
            forward_sync_buffers=False,
        )

    def rows(self, size: int) -> range:
        return shard_rows(size, self.rank, self.world)

    def sync(self, last: bool) -> AbstractContextManager[object]:
        """Around a micro-batch's forward and backward: the gradients are all-reduced once, on
        the shard's last micro-batch, after the earlier ones accumulated locally."""
        return nullcontext() if last else self.loss.no_sync()

    def sum_over_ranks(
        self, sums: dict[str, float], priorities: torch.Tensor
    ) -> tuple[dict[str, float], torch.Tensor]:
        """The metric sums and the (B,) priorities of all ranks (each filled its own rows, zeros
        elsewhere), in one all-reduce; float64, so a priority comes back exactly as computed."""
        names = sorted(sums)
        packed = torch.from_numpy(
            np.concatenate(
                [np.array([sums[n] for n in names], dtype=np.float64), priorities.double().numpy()]
            )
        )
        on_device = packed.to(self.device)  # NCCL reduces CUDA tensors only
        dist.all_reduce(on_device)
        total = on_device.cpu()
        return {n: float(v) for n, v in zip(names, total[: len(names)], strict=True)}, total[
            len(names) :
        ].float()
