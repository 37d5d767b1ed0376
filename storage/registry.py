"""Policy versions in the MLflow model registry: publish, follow an alias, fetch with a local cache.

A version is a directory written by the policy (adapter, heads, tokenizer, base pointer + hash);
it is logged as an artifact folder `policy-<id>` of an MLflow run and registered with
`create_model_version(source=<run artifacts>/policy-<id>)` (MLflow 3's `register_model` rejects plain
artifact folders). Tags carry the learner step, samples seen, replay size and run id.

Integrity: publishing writes the version's `manifest.json` (the sha256 of every file, see
`storage.policy_manifest`) and records the manifest's own sha256 as the tag `manifest_sha256`.
Every fetch checks the local copy, cached or fresh, against both; a copy that fails is fetched once
more, and a second failure is a `PolicyIntegrityError` naming the version and the file. A version
published before manifests existed (neither the tag nor the file) is loaded with a one-time warning:
refusing it would strand every registry that predates the check.

MLflow model: publishing also writes the version's MLmodel (`storage.policy_mlflow`), so a version
opens in the MLflow UI and loads with `mlflow.pyfunc.load_model("models:/<name>@champion")`.

Aliases: MLflow reserves `latest` and resolves it to the highest version, which is exactly what
the learner publishes last, so `latest` needs no alias of its own; `champion` (moved by
evaluation) and any other name are real registry aliases.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage.policy_manifest import MANIFEST, PolicyIntegrityError, manifest_problem, write_manifest
from storage.policy_mlflow import write_mlflow_model
from storage.run_owners import fail_orphaned_runs, owner_tags
from storage.secrets import redact

log = logging.getLogger(__name__)

LATEST = "latest"
CHAMPION = "champion"
MANIFEST_TAG = "manifest_sha256"
_warned_legacy: set[tuple[str, int]] = set()
_swept: set[tuple[str, str]] = (
    set()
)  # (tracking URI, experiment) whose orphaned runs this process closed  # versions without a manifest, warned about once each


class RegistrySettings(BaseSettings):
    """Where policy versions live; `DISTRL_MLFLOW_*` variables, or MLflow's own `MLFLOW_TRACKING_URI`."""

    model_config = SettingsConfigDict(env_prefix="DISTRL_MLFLOW_", extra="ignore")

    tracking_uri: str = Field(
        default_factory=lambda: os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///.distrl/mlflow.db"),
        description="MLflow tracking/registry URI: sqlite:///path.db (embedded) or http://host:5000.",
    )
    artifact_location: str | None = Field(
        default=None,
        description="Artifact root for new experiments (e.g. s3://bucket/mlflow); default: .distrl/mlartifacts "
        "for a SQLite backend, the server's default otherwise.",
    )
    experiment: str = Field(default="distrl", description="MLflow experiment of learner and evaluation runs.")
    model_name: str = Field(default="distrl-policy", description="Registered model name of the policy.")
    cache_dir: str = Field(default=".distrl/policy-cache", description="Local cache of fetched versions.")


class SiblingPublished(RuntimeError):
    """Another run published a version from the same parent while this one trained (one line)."""


@dataclass(frozen=True)
class PolicyVersion:
    version: int
    path: Path
    tags: dict[str, str]


class PolicyRegistry:
    """Thin, typed wrapper over `MlflowClient` for the one registered policy model."""

    def __init__(self, settings: RegistrySettings | None = None) -> None:
        from mlflow import MlflowClient

        self.settings = settings or RegistrySettings()
        uri = self.settings.tracking_uri
        if uri.startswith("sqlite:///"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        self.name = self.settings.model_name
        self.cache = Path(self.settings.cache_dir)

    # ----- experiment / runs --------------------------------------------------------------------
    def experiment_id(self) -> str:
        found = self.client.get_experiment_by_name(self.settings.experiment)
        if found is not None:
            return found.experiment_id
        location = self.settings.artifact_location
        if location is None and self.settings.tracking_uri.startswith("sqlite:///"):
            db = Path(self.settings.tracking_uri.removeprefix("sqlite:///")).resolve()
            location = (db.parent / "mlartifacts").as_uri()
        try:
            return self.client.create_experiment(self.settings.experiment, artifact_location=location)
        except Exception:  # another process created it first
            found = self.client.get_experiment_by_name(self.settings.experiment)
            if found is None:
                raise
            return found.experiment_id

    def start_run(self, run_name: str, tags: dict[str, str] | None = None, *, owned: bool = True) -> str:
        """A new run tagged with its owner process (unless `owned` is False: a run that many processes
        append to, such as the learning curve); the first start in a process closes runs that dead
        processes of this host left RUNNING (`storage.run_owners`)."""
        experiment = self.experiment_id()
        if (self.settings.tracking_uri, experiment) not in _swept:
            _swept.add((self.settings.tracking_uri, experiment))
            fail_orphaned_runs(self.client, experiment)
        run = self.client.create_run(
            experiment, run_name=run_name, tags=(tags or {}) | (owner_tags() if owned else {})
        )
        return run.info.run_id

    # ----- publish ------------------------------------------------------------------------------
    def publish(
        self,
        version_dir: Path,
        *,
        run_id: str,
        tags: dict[str, object] | None = None,
        siblings_after: int | None = None,
    ) -> int:
        """Log `version_dir` to the run and register it as a new version; returns the version number.

        With `siblings_after` (the newest version when the publishing run started) and a
        `parent_version` tag: refuse (`SiblingPublished`) when another run published a version
        above it from the same parent, i.e. two learners trained from one version at once. A later
        run that starts from a parent with older children (a nightly retrain from the same
        champion) is not refused. Checked before the upload and again once registered: the registry
        numbers versions in order, so of two racing runs the lower number stays and the other
        run's version is deleted before anyone is told of it."""
        version_dir = Path(version_dir)
        if not version_dir.is_dir() or not any(version_dir.iterdir()):
            raise ValueError(f"publish: {version_dir} is not a non-empty policy version directory")
        parent = (tags or {}).get("parent_version")
        guard = None if parent is None or siblings_after is None else (str(parent), siblings_after)
        if guard is not None:
            self._refuse_siblings(*guard, run_id=run_id)
        # Rewritten at every publish: a reused directory's old manifest would not match its new files.
        digest = write_manifest(version_dir)
        write_mlflow_model(version_dir, digest)  # an MLflow pyfunc model too (storage.policy_mlflow)
        # One artifact folder per publish: a learner run publishes many versions.
        folder = f"policy-{uuid.uuid4().hex[:12]}"
        self.client.log_artifacts(run_id, str(version_dir), folder)
        self._ensure_model()
        artifact_uri = self.client.get_run(run_id).info.artifact_uri
        str_tags = {k: str(v) for k, v in (tags or {}).items()} | {"run_id": run_id, MANIFEST_TAG: digest}
        mv = self.client.create_model_version(
            self.name, source=f"{artifact_uri}/{folder}", run_id=run_id, tags=str_tags
        )
        if guard is not None:
            try:
                self._refuse_siblings(*guard, run_id=run_id, below=int(mv.version))
            except SiblingPublished as exc:
                self.client.delete_model_version(self.name, mv.version)
                raise SiblingPublished(f"{exc} (its own v{mv.version} was withdrawn)") from None
        log.info("published %s version %s", self.name, mv.version)
        return int(mv.version)

    def _refuse_siblings(self, parent: str, after: int, *, run_id: str, below: int | None = None) -> None:
        """`SiblingPublished` if another run published a version in (after, below) from `parent`."""
        query = (
            f"name = '{_quote(self.name)}' and tags.parent_version = '{_quote(parent)}' "
            f"and version_number > {int(after)}"
        )
        rivals = sorted(
            int(v.version)
            for v in self.client.search_model_versions(query)
            if v.run_id != run_id and (below is None or int(v.version) < below)
        )
        if rivals:
            raise SiblingPublished(
                f"v{parent} already has child v{rivals[0]} from another run that started with or after this one: "
                "two learners trained from one version at once, and this run publishes nothing. Run one "
                "learner per registered model (the replay's lease stops a second one of the same replay)"
            )

    def _ensure_model(self) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.name)
        except MlflowException:
            try:
                self.client.create_registered_model(self.name)
            except MlflowException:
                self.client.get_registered_model(self.name)  # created concurrently: fine

    def set_alias(self, alias: str, version: int) -> None:
        if alias.lower() == LATEST:
            raise ValueError("'latest' is MLflow's reserved name for the highest version; it moves by itself")
        self.client.set_registered_model_alias(self.name, alias, str(version))

    # ----- resolve / fetch ----------------------------------------------------------------------
    def resolve(self, ref: str | int) -> int | None:
        """Version number for an alias (`latest`, `champion`, ...) or a version; None if there is none yet."""
        from mlflow.exceptions import MlflowException

        if isinstance(ref, int) or str(ref).isdigit():
            return int(ref)
        try:
            if str(ref).lower() == LATEST:
                found = self.client.search_model_versions(
                    f"name = '{_quote(self.name)}'", order_by=["version_number DESC"], max_results=1
                )
                return int(found[0].version) if found else None
            return int(self.client.get_model_version_by_alias(self.name, str(ref)).version)
        except MlflowException:
            return None

    def tags(self, version: int) -> dict[str, str]:
        return dict(self.client.get_model_version(self.name, str(version)).tags)

    def fetch(self, ref: str | int) -> PolicyVersion:
        """Download a version once into the cache (atomically), check its files against the manifest
        recorded at publish time, and return its local directory. A copy that fails the check is
        fetched again once; a second failure raises `PolicyIntegrityError`."""
        version = self.resolve(ref)
        if version is None:
            raise LookupError(
                f"no version of '{self.name}' for {ref!r} in {redact(self.settings.tracking_uri)}; "
                "publish one first (the learner does) or check DISTRL_MLFLOW_TRACKING_URI"
            )
        tags = self.tags(version)
        target = self.cache / self.name / str(version)
        for attempt in (1, 2):
            if not target.exists():
                self._download(version, target)
            problem = manifest_problem(target, tags.get(MANIFEST_TAG))
            if problem is None:
                break
            if attempt == 2:
                self._discard(target)  # nothing damaged stays in the cache for the next load
                raise PolicyIntegrityError(
                    f"policy version {version} of '{self.name}': {problem}, in a fresh download too; the "
                    "stored artifact is damaged. Publish a new version (or point the alias at an intact one)."
                )
            log.warning(
                "policy version %d of '%s': %s in the local copy %s; fetching it again",
                version, self.name, problem, target,
            )  # fmt: skip
            self._discard(target)
        legacy = MANIFEST_TAG not in tags and not (target / MANIFEST).exists()
        if legacy and (self.name, version) not in _warned_legacy:
            _warned_legacy.add((self.name, version))
            log.warning(
                "policy version %d of '%s' was published without a manifest (before integrity checks): "
                "its files are loaded unchecked; publish a new version to have them checked",
                version, self.name,
            )  # fmt: skip
        return PolicyVersion(version=version, path=target, tags=tags)

    def _download(self, version: int, target: Path) -> None:
        import mlflow

        tmp = self.cache / self.name / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            uri = self.client.get_model_version_download_uri(self.name, str(version))
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=uri, dst_path=str(tmp), tracking_uri=self.settings.tracking_uri
            )
            Path(local).rename(target) if Path(local) != tmp else tmp.rename(target)
        except OSError as exc:
            # Another collector thread fetched it first: renaming a directory onto a full one
            # fails with ENOTEMPTY on Linux (EEXIST elsewhere); its copy is the same version.
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not target.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _discard(self, target: Path) -> None:
        # Renamed away first, so that a concurrent fetch sees either the damaged copy or none.
        aside = target.with_name(f".bad-{target.name}-{uuid.uuid4().hex[:8]}")
        try:
            target.rename(aside)
        except FileNotFoundError:  # another thread discarded it already
            return
        shutil.rmtree(aside, ignore_errors=True)

    def versions(self) -> list[int]:
        found = self.client.search_model_versions(f"name = '{_quote(self.name)}'")
        return sorted(int(v.version) for v in found)


def _quote(name: str) -> str:
    # MLflow's filter grammar has no bind parameters; model names are ours, but escape quotes anyway.
    return name.replace("'", "\\'")
