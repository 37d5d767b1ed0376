"""Mixed precision for training: bfloat16 autocast around each forward pass, never around updates.

torch.autocast keeps the low-precision copy of every trainable weight it casts until the
*outermost* autocast context exits. A context held open across optimiser steps therefore keeps
forwarding with the weights as they were when it opened: the matmuls stop seeing the updates while
embeddings and norms (not cast) still learn. On an H200 that held a tiny model's warm start at
6 % success where float32 reached 56 % (docs/performance.md, "On a GPU"). So autocast opens per
forward pass here, and training refuses to run inside a caller's autocast."""

from __future__ import annotations

import torch

from distrl_core.learner.config import LearnerConfig

_DEVICE_TYPES = ("cuda", "cpu")


def autocast(device: torch.device, cfg: LearnerConfig) -> torch.autocast:
    """bfloat16 only on CUDA: CPU autocast is slower than float32 on the tiny model, and the
    learner's tests compare CPU updates to 1e-6."""
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and cfg.mixed_precision)


def refuse_outer_autocast(what: str) -> None:
    """Raise if ``what`` (a training loop) was called inside an open torch.autocast context."""
    active = [kind for kind in _DEVICE_TYPES if torch.is_autocast_enabled(kind)]
    if active:
        raise RuntimeError(
            f"{what} was called inside torch.autocast({active[0]!r}). autocast keeps its bfloat16 "
            "copies of the weights until the outermost context exits, so every update after the "
            "first would train on stale weights. Call it outside autocast: the learner's "
            "mixed_precision setting already autocasts each forward pass on CUDA."
        )
