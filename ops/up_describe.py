"""The text `distrl up` prints once its stack is up (`Stack.describe`): addresses, variables, next steps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ops import postgres
from ops.up_config import recipe

if TYPE_CHECKING:
    from ops.up import Stack


def describe(stack: Stack, *, hidden: set[str]) -> str:
    """`hidden`: variables of env.sh not printed (secrets)."""
    shown = "\n".join(f"  {k}={v}" for k, v in stack.client_env().items() if k not in hidden)
    cwd = Path.cwd()
    rel = stack.run_dir.relative_to(cwd) if stack.run_dir.is_relative_to(cwd) else stack.run_dir
    bucket = stack.config.bucket
    return "\n".join(
        [
            f"DistRL stack up in {stack.timings.get('total_s', 0):.1f} s (folder {rel})",
            f"  Prefect UI   {stack.url('prefect')}" + ("" if stack.config.ui else " (UI off)"),
            f"  MLflow UI    {stack.mlflow_runs_url or stack.url('mlflow')}",
            f"  database     {database_text(stack, rel)}",
            f"  S3 (moto)    {stack.url('s3')}  bucket {bucket}: store {stack.store_uri}, "
            f"MLflow artifacts s3://{bucket}/mlflow",
            f"  work pools   {', '.join(stack.pools)} (one process worker each; logs in {rel}/logs/)",
            "",
            f"In another shell: source {rel}/env.sh   (these, plus moto's dummy AWS keys):",
            shown,
            'then e.g. (docs/operations.md, "Trying it on one machine": a run where held-out success rises):',
            *(f"  {line}" for line in recipe()),
        ]
    )


def database_text(stack: Stack, rel: Path) -> str:
    """Where both servers keep their data; never the password (the servers got it as PGPASSWORD)."""
    server = stack.database
    if server is None:
        note = f"; {stack.database_note}" if stack.database_note else ""
        return f"SQLite ({rel}/prefect/prefect.db, {rel}/mlflow.db){note}"
    where = "started by this stack" if "postgres" in stack.procs else "DISTRL_POSTGRES_URL"
    return (
        f"PostgreSQL {server.host}:{server.port} ({where}) as {server.user}: databases "
        f"{postgres.PREFECT_DB}, {postgres.MLFLOW_DB}"
    )
