"""The setup steps of docs/operations.md that `distrl` provides: the work pools of prefect.yaml (so
the recipe's pool loop cannot drift from the deployments) and the store's bucket, on a real S3 API
(moto)."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest
import yaml

from ops.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_work_pools_are_every_pool_a_deployment_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["work-pools", "--project-dir", str(ROOT)]) == 0
    printed = capsys.readouterr().out.split()
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    assert sorted(printed) == sorted({d["work_pool"]["name"] for d in deployments})
    assert "evaluator" in printed and len(printed) == len(set(printed))


def test_work_pools_without_prefect_yaml_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["work-pools", "--project-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "prefect.yaml not found" in err and "\n" not in err


def test_create_bucket_creates_it_once_in_the_configured_region(
    aws_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = f"distrl-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("DISTRL_STORE_URI", f"s3://{bucket}/store")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["create-bucket"]) == 0
    assert capsys.readouterr().out.strip() == f"created bucket {bucket!r} at {aws_env}"
    s3 = boto3.client("s3", endpoint_url=aws_env, region_name="eu-west-1")
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "eu-west-1"

    s3.put_object(Bucket=bucket, Key="store/kept", Body=b"x")
    assert main(["create-bucket"]) == 0  # a second run leaves it, and what it holds, as it is
    assert capsys.readouterr().out.strip() == f"bucket {bucket!r} already exists at {aws_env}"
    assert s3.get_object(Bucket=bucket, Key="store/kept")["Body"].read() == b"x"


def test_create_bucket_of_a_local_store_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISTRL_STORE_URI", str(tmp_path / "store"))
    assert main(["create-bucket"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a local folder, not S3" in err and "DISTRL_STORE_URI=s3://" in err
