"""Padded (B, T) batches built from stored step rows (any table with the step schema's columns).

The learner never imports storage: it takes a pyarrow table (e.g. ``Replay.sample(...).steps``) or
a list of step dicts, grouped into trajectories by ``sample_idx`` when present (one group per draw,
so a trajectory drawn twice appears twice) or else by ``episode_id``, each ordered by ``step``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from distrl_core.policy.types import StepInput

__all__ = ["REQUIRED_COLUMNS", "StepBatch"]

REQUIRED_COLUMNS = (
    "episode_id",
    "step",
    "instruction",
    "observation_text",
    "raw_output",
    "action",
    "action_valid",
    "reward",
    "done",
    "episode_success",
    "behaviour_logprob",
    "action_token_count",
    "policy_version",
)
# Read when present: the replay's draw index, the screenshot, and the task id (gigpo's groups).
OPTIONAL_COLUMNS = ("sample_idx", "screenshot_png", "task_id")


def _columns(rows: Any) -> dict[str, list[Any]]:
    """Column lists from a pyarrow table (duck-typed: ``to_pydict``) or a sequence of dicts."""
    if hasattr(rows, "to_pydict"):
        names = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in rows.column_names]
        data: dict[str, list[Any]] = rows.select(names).to_pydict()
    else:
        rows = list(rows)
        keys = set(rows[0]) if rows else set(REQUIRED_COLUMNS)
        data = {k: [r[k] for r in rows] for k in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if k in keys}
    missing = [c for c in REQUIRED_COLUMNS if c not in data]
    if missing:
        raise ValueError(
            f"step rows lack column(s) {missing}; pass rows with the trajectory schema's columns"
        )
    return data


@dataclass
class StepBatch:
    """Trajectories as padded tensors; ``steps`` lists the real steps row by row.

    ``flat_index``/``row_first`` place each flat step into the (B, T) grid (see policy.StepLayout).
    ``repeat`` marks a step whose action and screen equal the previous step's (the action changed
    nothing and was taken again). ``history_complete`` is False when a row starts mid-episode, so
    the previous actions of its first steps are unknown. ``task_ids``: each row's task id, or its
    first instruction when the rows carry no ``task_id`` column.
    """

    steps: Sequence[StepInput]
    shape: tuple[int, int]
    flat_index: torch.Tensor  # (N,)
    row_first: torch.Tensor  # (B,)
    mask: torch.Tensor  # (B, T) bool
    rewards: torch.Tensor  # (B, T) float32
    dones: torch.Tensor  # (B, T) float32
    logp_mu: torch.Tensor  # (B, T) float32
    invalid: torch.Tensor  # (B, T) float32, 1 where the action was invalid
    repeat: torch.Tensor  # (B, T) float32
    policy_versions: torch.Tensor  # (B, T) int64 (0 at padding)
    success: torch.Tensor  # (B,) float32
    is_weights: torch.Tensor | None  # (B,) float32
    episode_ids: list[str]
    history_complete: bool
    task_ids: list[str]

    @property
    def size(self) -> int:
        return self.shape[0]

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @classmethod
    def from_rows(cls, rows: Any, is_weights: Sequence[float] | np.ndarray | None = None) -> StepBatch:
        data = _columns(rows)
        n = len(data["episode_id"])
        if n == 0:
            raise ValueError("no step rows: a batch needs at least one step")
        keys = data.get("sample_idx") or data["episode_id"]
        groups: dict[Any, list[int]] = {}
        for i, key in enumerate(keys):
            groups.setdefault(key, []).append(i)
        if "sample_idx" in data:
            groups = dict(sorted(groups.items()))
        order = [sorted(members, key=lambda i: data["step"][i]) for members in groups.values()]
        rows_n, cols_n = len(order), max(len(g) for g in order)
        if is_weights is not None and len(is_weights) != rows_n:
            raise ValueError(
                f"is_weights has {len(is_weights)} entries but the rows form {rows_n} trajectories; "
                "pass one weight per draw (SampleBatch.is_weights with its steps)"
            )
        grid = {name: np.zeros((rows_n, cols_n), dtype=np.float32) for name in ("r", "d", "mu", "inv", "rep")}
        versions = np.zeros((rows_n, cols_n), dtype=np.int64)
        mask = np.zeros((rows_n, cols_n), dtype=bool)
        steps: list[StepInput] = []
        flat_index, row_first, success, episode_ids, task_ids = [], [], [], [], []
        history_complete = True
        for b, members in enumerate(order):
            row_first.append(len(steps))
            episode_ids.append(data["episode_id"][members[0]])
            task_ids.append(data.get("task_id", data["instruction"])[members[0]])
            success.append(float(bool(data["episode_success"][members[0]])))
            history_complete &= data["step"][members[0]] == 0
            history: list[str] = []
            for t, i in enumerate(members):
                screenshot = data["screenshot_png"][i] if "screenshot_png" in data else None
                steps.append(
                    StepInput(
                        instruction=data["instruction"][i],
                        observation_text=data["observation_text"][i],
                        action=data["action"][i],
                        raw_output=data["raw_output"][i],
                        token_count=int(data["action_token_count"][i]),
                        history=tuple(history),
                        screenshot_png=screenshot,
                    )
                )
                flat_index.append(b * cols_n + t)
                mask[b, t] = True
                grid["r"][b, t] = data["reward"][i]
                grid["d"][b, t] = float(bool(data["done"][i]))
                grid["mu"][b, t] = data["behaviour_logprob"][i]
                grid["inv"][b, t] = 0.0 if data["action_valid"][i] else 1.0
                if t > 0:
                    prev = members[t - 1]
                    same = data["action"][i] == data["action"][prev]
                    grid["rep"][b, t] = float(
                        same and data["observation_text"][i] == data["observation_text"][prev]
                    )
                versions[b, t] = int(data["policy_version"][i])
                history.append(data["action"][i])
        weights = None if is_weights is None else torch.as_tensor(np.asarray(is_weights, dtype=np.float32))
        return cls(
            steps=steps,
            shape=(rows_n, cols_n),
            flat_index=torch.tensor(flat_index, dtype=torch.long),
            row_first=torch.tensor(row_first, dtype=torch.long),
            mask=torch.from_numpy(mask),
            rewards=torch.from_numpy(grid["r"]),
            dones=torch.from_numpy(grid["d"]),
            logp_mu=torch.from_numpy(grid["mu"]),
            invalid=torch.from_numpy(grid["inv"]),
            repeat=torch.from_numpy(grid["rep"]),
            policy_versions=torch.from_numpy(versions),
            success=torch.tensor(success, dtype=torch.float32),
            is_weights=weights,
            episode_ids=episode_ids,
            history_complete=history_complete,
            task_ids=task_ids,
        )

    def to(self, device: torch.device | str) -> StepBatch:
        moved = {
            name: getattr(self, name).to(device)
            for name in (
                "mask",
                "rewards",
                "dones",
                "logp_mu",
                "invalid",
                "repeat",
                "policy_versions",
                "success",
            )
        }
        weights = None if self.is_weights is None else self.is_weights.to(device)
        return StepBatch(
            **{**self.__dict__, **moved, "is_weights": weights},
        )

    def select_rows(self, rows: Sequence[int]) -> StepBatch:
        """A sub-batch of some trajectories (for gradient accumulation and filtering)."""
        rows = list(rows)
        per_row: dict[int, list[int]] = {b: [] for b in rows}
        cols = self.shape[1]
        for n, flat in enumerate(self.flat_index.tolist()):
            if flat // cols in per_row:
                per_row[flat // cols].append(n)
        width = max((len(v) for v in per_row.values()), default=1)
        steps: list[StepInput] = []
        flat_index: list[int] = []
        row_first: list[int] = []
        for new_b, b in enumerate(rows):
            row_first.append(len(steps))
            for t, n in enumerate(per_row[b]):
                steps.append(self.steps[n])
                flat_index.append(new_b * width + t)
        index = torch.tensor(rows, dtype=torch.long)

        def take(x: torch.Tensor) -> torch.Tensor:
            return x[index.to(x.device)][:, :width]

        return StepBatch(
            steps=steps,
            shape=(len(rows), width),
            flat_index=torch.tensor(flat_index, dtype=torch.long),
            row_first=torch.tensor(row_first, dtype=torch.long),
            mask=take(self.mask),
            rewards=take(self.rewards),
            dones=take(self.dones),
            logp_mu=take(self.logp_mu),
            invalid=take(self.invalid),
            repeat=take(self.repeat),
            policy_versions=take(self.policy_versions),
            success=self.success[index.to(self.success.device)],
            is_weights=None if self.is_weights is None else self.is_weights[index.to(self.is_weights.device)],
            episode_ids=[self.episode_ids[b] for b in rows],
            history_complete=self.history_complete,
            task_ids=[self.task_ids[b] for b in rows],
        )
