"""A policy version as an MLflow pyfunc model: the `loader_module` its MLmodel names.

MLflow calls `_load_pyfunc(<the version's local folder>)` for `mlflow.pyfunc.load_model(...)` and for
`mlflow models serve`. Before anything is built, the folder's files are checked against the
version's manifest, and the manifest against the digest recorded at publish time (the MLmodel's
metadata): the checks `PolicyRegistry.fetch` makes, so a damaged download is refused with a
`PolicyIntegrityError` naming the file instead of acting with other weights. The policy itself is
built by `load_policy`, with its own base-hash check. Columns and parameters:
`storage.policy_mlflow`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrl_core.envs.actions import format_action
from distrl_core.envs.observation import Observation
from distrl_core.policy import Policy, load_policy
from storage.policy_manifest import PolicyIntegrityError, manifest_problem
from storage.policy_mlflow import MANIFEST_KEY

__all__ = ["PolicyModel", "observations_of"]


def _text(value: Any) -> str:
    return "" if value is None or value != value else str(value)  # NaN: a column left out of a row


def observations_of(rows: Any, screen_size: tuple[int, int]) -> list[Observation]:
    """The policy's observations for a DataFrame of input rows (see `storage.policy_mlflow`)."""
    observations = []
    for row in rows.to_dict("records"):
        previous = tuple(line for line in _text(row.get("previous_actions")).splitlines() if line.strip())
        screenshot = row.get("screenshot_png")
        observations.append(
            Observation(
                instruction=_text(row.get("instruction")),
                step=len(previous),
                previous_actions=previous,
                elements=(),
                ui_text=_text(row.get("observation_text")),
                ui_xml="",
                screenshot_png=screenshot if isinstance(screenshot, bytes) else None,
                screen_size=screen_size,
            )
        )
    return observations


class PolicyModel:
    """What `mlflow.pyfunc.load_model` wraps: `predict(rows, params)` → action and log π per row."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs installed

        greedy = bool((params or {}).get("greedy", True))
        observations = observations_of(pd.DataFrame(model_input), self.policy.config.screen_size)
        outputs = self.policy.act(observations, greedy=greedy)
        return pd.DataFrame(
            {
                "action": [format_action(out.action) for out in outputs],
                "logprob": [float(out.logprob) for out in outputs],
                "raw_output": [out.raw_text for out in outputs],
            }
        )


def _load_pyfunc(data_path: str) -> PolicyModel:
    from mlflow.models import Model

    directory = Path(data_path)
    digest = (Model.load(str(directory / "MLmodel")).metadata or {}).get(MANIFEST_KEY)
    if digest is None:
        raise PolicyIntegrityError(
            f"policy model {directory}: its MLmodel records no manifest digest ({MANIFEST_KEY}); "
            "it was not written by PolicyRegistry.publish. Publish the version again."
        )
    problem = manifest_problem(directory, str(digest))
    if problem is not None:
        raise PolicyIntegrityError(
            f"policy model {directory}: {problem}; the downloaded copy is damaged. Load it again, "
            "or publish a new version (or point the alias at an intact one)."
        )
    return PolicyModel(load_policy(directory).eval())
