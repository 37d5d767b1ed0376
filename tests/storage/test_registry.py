from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest

from storage.registry import PolicyRegistry, RegistrySettings


def _version_dir(root: Path, content: str) -> Path:
    path = root / f"v-{uuid.uuid4().hex[:6]}"
    (path / "adapter").mkdir(parents=True)
    (path / "adapter" / "weights.bin").write_bytes(content.encode() * 100)
    (path / "base.json").write_text('{"hash": "abc"}')
    return path


def _registry(tmp_path: Path, **kw) -> PolicyRegistry:
    settings = RegistrySettings(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", cache_dir=str(tmp_path / "cache"), **kw
    )
    return PolicyRegistry(settings)


def test_publish_resolve_alias_and_cached_fetch(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    assert registry.resolve("latest") is None
    run = registry.start_run("learner")
    v1 = registry.publish(_version_dir(tmp_path, "one"), run_id=run, tags={"learner_step": 10})
    v2 = registry.publish(_version_dir(tmp_path, "two"), run_id=run, tags={"learner_step": 20})
    assert (v1, v2) == (1, 2)
    assert registry.resolve("latest") == 2
    registry.set_alias("champion", 1)
    assert registry.resolve("champion") == 1
    fetched = registry.fetch("champion")
    assert fetched.version == 1 and fetched.tags["learner_step"] == "10" and fetched.tags["run_id"] == run
    assert (fetched.path / "adapter" / "weights.bin").read_bytes() == b"one" * 100
    # A second fetch is served from the cache: same directory, nothing downloaded again.
    marker = fetched.path / "cached-marker"
    marker.write_text("x")
    assert registry.fetch(1).path == fetched.path and marker.exists()
    # Another process (a new client) sees the same versions.
    assert _registry(tmp_path).resolve("latest") == 2


def test_a_fetch_that_loses_the_race_to_another_thread_uses_the_winners_copy(tmp_path, monkeypatch) -> None:
    import shutil

    import mlflow.artifacts

    registry = _registry(tmp_path)
    registry.publish(_version_dir(tmp_path, "one"), run_id=registry.start_run("learner"))
    download = mlflow.artifacts.download_artifacts

    def download_while_another_thread_wins(**kwargs):
        local = download(**kwargs)
        shutil.copytree(local, registry.cache / registry.name / "1")  # the other fetch renamed first
        return local

    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", download_while_another_thread_wins)
    fetched = registry.fetch(1)
    assert (fetched.path / "adapter" / "weights.bin").read_bytes() == b"one" * 100
    assert [p.name for p in (registry.cache / registry.name).iterdir()] == ["1"]  # no temp dir left


def test_a_version_published_again_from_a_fetched_copy_is_intact(tmp_path: Path) -> None:
    """A fetched version folder holds the MLflow model files of its own publish; publishing it as a
    new version (an evaluator test, a retrain from the champion) writes them anew, outside the
    manifest, so the new version's files still hash as recorded."""
    registry = _registry(tmp_path)
    run = registry.start_run("learner")
    first = registry.publish(_version_dir(tmp_path, "one"), run_id=run)
    copy = registry.fetch(first).path
    assert (copy / "MLmodel").is_file()
    second = registry.publish(copy, run_id=run)
    fresh = PolicyRegistry(
        RegistrySettings(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", cache_dir=str(tmp_path / "other-cache")
        )
    )
    assert (fresh.fetch(second).path / "MLmodel").is_file()  # PolicyIntegrityError before the fix
    assert fresh.fetch(first).path.is_dir()


def test_latest_is_reserved_and_errors_name_the_fix(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    with pytest.raises(ValueError, match="reserved"):
        registry.set_alias("latest", 1)
    with pytest.raises(LookupError, match="publish one first"):
        registry.fetch("champion")
    with pytest.raises(ValueError, match="non-empty"):
        registry.publish(tmp_path / "missing", run_id=registry.start_run("x"))


def test_artifacts_on_s3(tmp_path: Path, aws_env: str, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", aws_env)
    bucket = f"mlflow-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=aws_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    registry = _registry(tmp_path, artifact_location=f"s3://{bucket}/artifacts")
    version = registry.publish(_version_dir(tmp_path, "s3"), run_id=registry.start_run("learner"))
    keys = [
        o["Key"] for o in boto3.client("s3", endpoint_url=aws_env).list_objects_v2(Bucket=bucket)["Contents"]
    ]
    assert any(k.endswith("/adapter/weights.bin") and "/policy-" in k for k in keys)
    assert (registry.fetch(version).path / "base.json").read_text() == '{"hash": "abc"}'
