"""The MLflow model files of a policy version, so that a version is also an MLflow pyfunc model.

`PolicyRegistry.publish` writes them into the version directory next to the policy's own files
(after the manifest), so the artifact folder a model version points at holds an `MLmodel` (the MLflow
UI reads it when a version is opened) and

    mlflow.pyfunc.load_model("models:/distrl-policy@champion")
    mlflow models serve -m models:/distrl-policy@champion --env-manager local

load the version through `tasks.policy_pyfunc` (MLflow imports it by name: the `loader_module` of
the pyfunc flavour; no pickled object, so loading runs no code from the artifact store). The
loader checks every file against the manifest and against the manifest digest recorded here in
the MLmodel's metadata, as `PolicyRegistry.fetch` does against the model version's tag.

Input: one row per step, `instruction` and `observation_text` (the compact UI text the policy
reads, `distrl sql`'s `steps.observation_text`), optionally `previous_actions` (one canonical action
per line, oldest first) and `screenshot_png` (vision policies); parameter `greedy` (default true:
the most likely action, else a sample). Output: `action` (canonical text, as
`distrl_core.envs.actions.format_action` writes it), `logprob` (log π of that action) and
`raw_output` (the chosen candidate's text, or the generated text).
"""

from __future__ import annotations

import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["LOADER_MODULE", "MANIFEST_KEY", "MLFLOW_FILES", "input_example", "write_mlflow_model"]

# Named, not imported: storage sits below tasks (tests/test_imports.py); MLflow imports it at load.
LOADER_MODULE = "tasks.policy_pyfunc"
MANIFEST_KEY = "distrl_manifest_sha256"  # in the MLmodel's metadata
# What `mlflow.pyfunc.save_model` writes; never a name of the policy's own files (version.py).
MLFLOW_FILES = (
    "MLmodel",
    "conda.yaml",
    "python_env.yaml",
    "requirements.txt",
    "input_example.json",
    "serving_input_example.json",
)
_REQUIREMENTS = ("distrl", "mlflow", "torch", "transformers")


def input_example() -> dict[str, list[str]]:
    """One step of the SimDroid home screen: what `distrl sql` shows in `steps.observation_text`."""
    return {
        "instruction": ["Open the Clock app"],
        "observation_text": [
            '[0] TextView "Clock" (40,300,280,540)\n[1] TextView "Settings" (300,300,540,540)'
        ],
        "previous_actions": [""],
    }


def _signature():
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema

    inputs = Schema(
        [
            ColSpec(DataType.string, "instruction"),
            ColSpec(DataType.string, "observation_text"),
            ColSpec(DataType.string, "previous_actions", required=False),
            ColSpec(DataType.binary, "screenshot_png", required=False),
        ]
    )
    outputs = Schema(
        [
            ColSpec(DataType.string, "action"),
            ColSpec(DataType.double, "logprob"),
            ColSpec(DataType.string, "raw_output"),
        ]
    )
    params = ParamSchema([ParamSpec("greedy", DataType.boolean, True)])
    return ModelSignature(inputs=inputs, outputs=outputs, params=params)


def _requirements() -> list[str]:
    """The installed versions (read from package metadata: nothing is resolved or downloaded)."""
    pinned = []
    for name in _REQUIREMENTS:
        try:
            pinned.append(f"{name}=={version(name)}")
        except PackageNotFoundError:  # a source checkout without an installed distrl
            pinned.append(name)
    return pinned


def write_mlflow_model(directory: Path, manifest_sha256: str) -> None:
    """Add the pyfunc model files to a version directory whose manifest hashes to `manifest_sha256`.

    Written after the manifest (they are not in it): the manifest's own digest is inside the MLmodel."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed
    from mlflow.pyfunc import save_model

    directory = Path(directory)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "model"  # save_model wants a new folder
        save_model(
            staged,
            loader_module=LOADER_MODULE,
            signature=_signature(),
            input_example=pd.DataFrame(input_example()),
            pip_requirements=_requirements(),
            metadata={MANIFEST_KEY: manifest_sha256},
        )
        for path in staged.iterdir():
            if path.name not in MLFLOW_FILES:
                raise RuntimeError(f"mlflow.pyfunc.save_model wrote an unexpected file {path.name}")
            shutil.copyfile(path, directory / path.name)
