"""Polyak (exponential moving) averaging of the policy's weights, for the versions the learner publishes.

Held-out success of consecutive raw versions swings by ±0.1-0.15 while in-distribution success
rises smoothly: each update fits the latest batch, and the tasks a batch happens to hold move the
policy back and forth in the directions that matter for unseen phrasings. An average of recent
weights sits in the middle of those swings. The learner keeps training its raw weights; what it
publishes (and so what collectors act with and evaluations score) is the average. Off-policy
correction already covers the gap: collectors record log μ of the weights they acted with.

    average = WeightAverage(policy_parameters, decay=0.99)
    ...optimizer.step(); average.update()
    with average.swapped_in():
        save_policy(policy, path)  # the averaged weights; the raw ones are back afterwards
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["WeightAverage", "averaging_decay"]


def averaging_decay(decay: float, updates: int) -> float:
    """The decay used at the ``updates``-th average update: ramps up from 0.1 so that the average
    follows the first updates closely instead of lagging at the starting weights for ~1/(1-decay)
    updates (the schedule of TensorFlow's ExponentialMovingAverage with num_updates)."""
    return min(decay, (1.0 + updates) / (10.0 + updates))


class WeightAverage:
    """An exponential moving average of ``parameters`` (each counted once)."""

    def __init__(self, parameters: Sequence[nn.Parameter], decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(
                f"the weight-average decay must be in (0, 1), got {decay}; 0 turns averaging off"
            )
        unique: dict[int, nn.Parameter] = {}
        for parameter in parameters:
            unique.setdefault(id(parameter), parameter)
        self.parameters = list(unique.values())
        self.decay = decay
        self.updates = 0
        self.shadow = [p.detach().clone() for p in self.parameters]

    @torch.no_grad()
    def update(self) -> None:
        """Move the average towards the current weights (call after each optimiser step)."""
        decay = averaging_decay(self.decay, self.updates)
        for shadow, parameter in zip(self.shadow, self.parameters, strict=True):
            shadow.lerp_(parameter.detach(), 1.0 - decay)
        self.updates += 1

    @torch.no_grad()
    def reset(self) -> None:
        """Start the average again from the current weights (e.g. after loading other weights)."""
        self.shadow = [p.detach().clone() for p in self.parameters]
        self.updates = 0

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The averaged weights in place of the raw ones inside the block; the raw ones after it,
        bit for bit (the block must not train)."""
        raw = [p.detach().clone() for p in self.parameters]
        with torch.no_grad():
            for parameter, shadow in zip(self.parameters, self.shadow, strict=True):
                parameter.copy_(shadow)
        try:
            yield
        finally:
            with torch.no_grad():
                for parameter, saved in zip(self.parameters, raw, strict=True):
                    parameter.copy_(saved)
