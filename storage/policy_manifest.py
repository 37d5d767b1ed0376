"""The manifest of a policy version: the sha256 of every file, so that a damaged copy is noticed.

`<dir>/manifest.json` is written by the registry at publish time (`PolicyRegistry.publish`), which
records the manifest's own digest as the model version's tag
`manifest_sha256`, so a manifest rewritten along with a damaged file does not pass either. A copy
is checked when it is fetched or taken from the cache (`storage.registry.PolicyRegistry.fetch`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from storage.policy_mlflow import MLFLOW_FILES

__all__ = [
    "MANIFEST",
    "PolicyIntegrityError",
    "file_digest",
    "manifest_digest",
    "manifest_problem",
    "write_manifest",
]

MANIFEST = "manifest.json"
_FORMAT = 1
_CHUNK = 1 << 20


class PolicyIntegrityError(ValueError):
    """A policy version's files are not the ones that were published (damaged, truncated, missing)."""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(directory: Path) -> list[str]:
    """The policy's own files: not the manifest, nor the MLflow model files written after it (each
    publish writes them anew, and the MLmodel records the manifest's digest itself)."""
    skipped = {MANIFEST, *MLFLOW_FILES}
    return sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and p.relative_to(directory).as_posix() not in skipped
    )


def write_manifest(directory: Path) -> str:
    """Hash every file of `directory` into its manifest; returns the manifest's own sha256."""
    files = {name: file_digest(directory / name) for name in _files(directory)}
    payload = json.dumps({"format": _FORMAT, "algorithm": "sha256", "files": files}, indent=1).encode()
    (directory / MANIFEST).write_bytes(payload)
    return hashlib.sha256(payload).hexdigest()


def manifest_digest(directory: Path) -> str | None:
    """The sha256 of `directory`'s manifest, None if it has none."""
    path = directory / MANIFEST
    return file_digest(path) if path.is_file() else None


def manifest_problem(directory: Path, expected_digest: str | None) -> str | None:
    """What is wrong with `directory` against its manifest (and the manifest against
    `expected_digest`, the registry's record), or None if every file hashes as recorded.

    A directory with neither a manifest nor a recorded digest predates manifests: the caller decides.
    """
    path = directory / MANIFEST
    if not path.is_file():
        return None if expected_digest is None else f"file {MANIFEST} is missing"
    if expected_digest is not None and file_digest(path) != expected_digest:
        return f"file {MANIFEST} does not hash to the digest recorded at publish time"
    try:
        recorded = json.loads(path.read_text())["files"]
        if not isinstance(recorded, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return f"file {MANIFEST} is not a readable manifest"
    present = set(_files(directory))
    for name in sorted(recorded):
        if name not in present:
            return f"file {name} is missing"
        if file_digest(directory / name) != recorded[name]:
            return f"file {name} does not hash to its recorded sha256 {recorded[name][:16]}..."
    # Files beyond the manifest are not read by the loader (which opens known names only): no problem.
    return None
