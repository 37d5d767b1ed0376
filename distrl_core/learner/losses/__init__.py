"""A loss per algorithm, each owning its slice of `LearnerConfig`, its typed extra inputs and its
traits (``base.Loss``). `LOSSES` is the one table from an `Algorithm` to its loss; no code outside
it tests an algorithm's name::

    loss = make_loss(LearnerConfig(algorithm="gigpo"))
    loss.traits.needs_groups  # True
    loss.config.clip_eps  # its slice: GiGPOConfig

Add an algorithm: its name to ``Algorithm`` and its fields to `LearnerConfig` (config.py), a module
here with its slice (a frozen dataclass of the fields it reads) and its `Loss` subclass, and its row
in `LOSSES`. A field its slice reads that another algorithm's does not is then refused, by name,
when set for that other algorithm (`field_readers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distrl_core.learner.losses.aride import ARideConfig, ARideLoss
from distrl_core.learner.losses.base import Loss, Objective, Traits, slice_fields
from distrl_core.learner.losses.baselines import DigiRLConfig, DigiRLLoss, FilteredBCConfig, FilteredBCLoss
from distrl_core.learner.losses.decoupled_ppo import DecoupledPPOConfig, DecoupledPPOLoss
from distrl_core.learner.losses.gigpo import GiGPOConfig, GiGPOLoss

if TYPE_CHECKING:
    from distrl_core.learner.config import Algorithm, LearnerConfig

__all__ = [
    "LOSSES",
    "ARideConfig",
    "ARideLoss",
    "DecoupledPPOConfig",
    "DecoupledPPOLoss",
    "DigiRLConfig",
    "DigiRLLoss",
    "FilteredBCConfig",
    "FilteredBCLoss",
    "GiGPOConfig",
    "GiGPOLoss",
    "Loss",
    "Objective",
    "Traits",
    "field_readers",
    "loss_type",
    "make_loss",
]

LOSSES: dict[Algorithm, type[Loss[Any]]] = {
    "aride": ARideLoss,
    "digirl": DigiRLLoss,
    "filtered_bc": FilteredBCLoss,
    "gigpo": GiGPOLoss,
    "decoupled_ppo": DecoupledPPOLoss,
}


def loss_type(algorithm: Algorithm) -> type[Loss[Any]]:
    """``algorithm``'s loss class (its ``traits`` say what the learner must do for it); an
    algorithm without one names where it goes."""
    try:
        return LOSSES[algorithm]
    except KeyError:
        raise ValueError(
            f"algorithm {algorithm!r} has no loss: add it to LOSSES in distrl_core/learner/losses/__init__.py"
        ) from None


def make_loss(config: LearnerConfig) -> Loss[Any]:
    """The loss of ``config.algorithm`` with its slice of ``config``."""
    return loss_type(config.algorithm).from_config(config)


def field_readers() -> dict[str, tuple[Algorithm, ...]]:
    """Each `LearnerConfig` field some loss reads -> the algorithms whose losses read it."""
    readers: dict[str, list[Algorithm]] = {}
    for algorithm, loss in LOSSES.items():
        for name in sorted(slice_fields(loss.slice_type)):
            readers.setdefault(name, []).append(algorithm)
    return {name: tuple(algorithms) for name, algorithms in readers.items()}
