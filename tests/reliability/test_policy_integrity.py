"""A damaged policy version is noticed, fetched again once, then refused by name.

Real parts: a tiny policy saved by `save_policy`, published to MLflow on SQLite with its artifacts in
a local folder, fetched through `PolicyRegistry.fetch` and loaded by `load_policy`.
"""

from __future__ import annotations

import datetime
import logging
import pickle
import traceback
from pathlib import Path

import pytest
import torch

from bench.integrity_probes import flip_byte
from distrl_core.policy import PolicyFileError, load_policy, save_policy
from storage.policy_manifest import MANIFEST, PolicyIntegrityError
from storage.registry import MANIFEST_TAG, PolicyRegistry, RegistrySettings


def _registry(tmp_path: Path) -> PolicyRegistry:
    settings = RegistrySettings(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", cache_dir=str(tmp_path / "cache")
    )
    return PolicyRegistry(settings)


@pytest.fixture
def published(tmp_path: Path, make_policy) -> tuple[PolicyRegistry, int]:
    registry = _registry(tmp_path)
    path = save_policy(make_policy(), tmp_path / "saved")
    return registry, registry.publish(path, run_id=registry.start_run("learner"))


def _stored_copy(tmp_path: Path, name: str) -> Path:
    """The published artifact's file (the registry's own copy, not the cache)."""
    (found,) = (tmp_path / "mlartifacts").rglob(name)
    return found


def test_publish_records_a_manifest_and_its_digest(published, tmp_path: Path) -> None:
    registry, version = published
    fetched = registry.fetch(version)
    assert (fetched.path / MANIFEST).is_file() and len(fetched.tags[MANIFEST_TAG]) == 64


def test_a_flipped_byte_in_the_cached_copy_is_fetched_again(published, tmp_path, caplog) -> None:
    registry, version = published
    weights = registry.fetch(version).path / "model" / "model.safetensors"
    original = weights.read_bytes()
    flip_byte(weights)  # in the tensor data: safetensors itself would load it without a word
    with caplog.at_level(logging.WARNING, logger="storage.registry"):
        fetched = registry.fetch(version)
    assert "model/model.safetensors does not hash" in caplog.text and "fetching it again" in caplog.text
    assert (fetched.path / "model" / "model.safetensors").read_bytes() == original
    load_policy(fetched.path)


def test_a_damaged_stored_version_is_refused_naming_version_and_file(published, tmp_path) -> None:
    registry, version = published
    flip_byte(_stored_copy(tmp_path, "model.safetensors"))
    with pytest.raises(PolicyIntegrityError, match=r"policy version 1 .*model/model\.safetensors"):
        registry.fetch(version)
    # A manifest rewritten to match the damage does not pass: its digest is the registry's tag.
    (stored_manifest,) = (tmp_path / "mlartifacts").rglob(MANIFEST)
    stored_manifest.write_text(stored_manifest.read_text().replace('"format": 1', '"format": 1 '))
    with pytest.raises(PolicyIntegrityError, match=rf"policy version 1 .*{MANIFEST}"):
        registry.fetch(version)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign_pickle", "empty"])
def test_a_damaged_heads_file_is_a_clean_error_that_never_suggests_unsafe_loading(
    published, tmp_path, damage
) -> None:
    registry, version = published
    directory = registry.fetch(version).path
    heads = directory / "heads.pt"
    payload = heads.read_bytes()
    if damage == "foreign_pickle":  # a valid file holding a class outside torch's allow-list
        torch.save({"when": datetime.date(2020, 1, 1)}, heads)
    else:
        damaged = {"garbage": pickle.dumps("not weights") * 10, "truncated": payload[: len(payload) // 2]}
        heads.write_bytes(damaged.get(damage, b""))
    with pytest.raises(PolicyFileError) as err:
        load_policy(directory)
    text = "".join(traceback.format_exception(err.value))
    assert "heads.pt" in str(err.value) and str(directory) in str(err.value)
    assert "weights_only" not in text and "arbitrary code" not in text


def test_a_version_published_before_manifests_loads_with_a_single_warning(
    tmp_path, make_policy, caplog
) -> None:
    registry = _registry(tmp_path)
    path = save_policy(make_policy(), tmp_path / "old")
    run = registry.start_run("learner")
    # What `publish` did before this change: the files as they are, no manifest, no digest tag.
    registry.client.log_artifacts(run, str(path), "policy-old")
    registry.client.create_registered_model(registry.name)
    source = f"{registry.client.get_run(run).info.artifact_uri}/policy-old"
    version = int(registry.client.create_model_version(registry.name, source=source, run_id=run).version)
    with caplog.at_level(logging.WARNING, logger="storage.registry"):
        load_policy(registry.fetch(version).path)
        load_policy(registry.fetch(version).path)
    warnings = [r for r in caplog.records if "without a manifest" in r.getMessage()]
    assert len(warnings) == 1 and f"version {version}" in warnings[0].getMessage()
