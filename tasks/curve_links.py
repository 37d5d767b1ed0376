"""Where a person finds a training run's held-out curve from Prefect: a markdown artifact linking the
MLflow curve run, on the learner's flow run page and on the evaluator's (Prefect's sidebar has no
Artifacts entry, so a run page is where one looks), and artifact descriptions that survive Prefect's
markdown renderer (which drops anything that looks like an HTML tag, e.g. `<training run>`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from uuid import UUID

from storage.registry import PolicyRegistry
from tasks import mlflow_ui

if TYPE_CHECKING:
    from mlflow.entities import Run

log = logging.getLogger(__name__)
LINK_KEY = "heldout-curve-link"
# A curve run tagged so once its links exist: every later point leaves them be.
LINKED_TAG = "prefect_links"
LINK_DESCRIPTION = (
    "the held-out learning curve of this training run, in MLflow (one point per scored version)"
)


def markdown_text(text: str) -> str:
    """`text` shown as written by a markdown renderer that drops HTML: `<`, `>` and `&` as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link_markdown(registry: PolicyRegistry, curve: Run) -> str:
    """A markdown link to the curve run's page, named as the run is."""
    name = markdown_text(curve.info.run_name or curve.info.run_id).replace("[", "\\[").replace("]", "\\]")
    url = mlflow_ui.run_url(registry.settings.tracking_uri, registry.experiment_id(), curve.info.run_id)
    return f"[{name}]({url})"


def link_curve(registry: PolicyRegistry, curve: Run) -> list[str]:
    """Link the curve from the flow runs of its training run and of the caller, once per curve run;
    returns the flow run ids linked (none outside a flow run, or when already linked)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactCreate
    from prefect.runtime import flow_run

    if curve.data.tags.get(LINKED_TAG) == "1":
        return []
    training_run = curve.data.tags.get("training_run", "")
    learner = (
        registry.client.get_run(training_run).data.tags.get("prefect.flow_run_id") if training_run else None
    )
    targets = list(dict.fromkeys(str(r) for r in (learner, flow_run.get_id()) if r))
    data = link_markdown(registry, curve)
    fields = {"key": LINK_KEY, "type": "markdown", "data": data, "description": LINK_DESCRIPTION}
    try:
        with get_client(sync_client=True) as client:
            for target in targets:
                client.create_artifact(ArtifactCreate(**fields, flow_run_id=UUID(target)))
    except Exception as exc:  # a missing link never fails an evaluation; the next point tries again
        log.warning("could not link the held-out curve from the flow runs %s: %s", targets, exc)
        return []
    registry.client.set_tag(curve.info.run_id, LINKED_TAG, "1")
    return targets
