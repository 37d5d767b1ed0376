"""`distrl status` while the continuous evaluator scores: every version on the printed held-out curve
shows the same held-out figure in the version list above it, even when a version is scored while
the report is being read (reading the store's SQL between the two reads takes seconds; the
evaluator scores a version every ~40 s)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from distrl_core.policy import save_policy
from distrl_core.policy.config import PolicyConfig
from distrl_core.policy.model import Policy
from storage.registry import PolicyRegistry
from tests.flows.test_evaluation_records import _record, _report

pytestmark = pytest.mark.slow

VERSION_LINE = re.compile(r"^\s+v(\d+)\s+step .* held-out\s+(\S+)")
CURVE_ROW = re.compile(r"^\s+v(\d+)(?: \(champion\))?\s+[\d.]+\s+\d+\s+([\d.]+%)\s")


def _figures(report: str) -> tuple[dict[int, str], dict[int, str]]:
    """The held-out figure per version in the version list, and on the curve."""
    listed, curve = {}, {}
    for line in report.splitlines():
        if match := VERSION_LINE.match(line):
            listed[int(match[1])] = match[2]
        elif match := CURVE_ROW.match(line):
            curve[int(match[1])] = match[2]
    return listed, curve


def test_a_version_scored_while_status_reads_is_never_missing_above_the_curve(
    embedded_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ops.status as status

    registry = PolicyRegistry()
    learner = registry.start_run("learner", tags={"role": "learner"})
    with tempfile.TemporaryDirectory() as tmp:
        path = save_policy(Policy.create(PolicyConfig()), Path(tmp) / "policy")
        versions = [registry.publish(path, run_id=learner) for _ in range(3)]
    _record([_report(v, "0101") for v in versions[:2]], training_run=learner)
    newest = versions[-1]

    # The evaluator finishes scoring the newest version while status queries the store.
    real_open_sql = status.open_sql

    def open_sql_while_the_evaluator_scores(store):
        _record([_report(newest, "0111")], training_run=learner)
        return real_open_sql(store)

    monkeypatch.setattr(status, "open_sql", open_sql_while_the_evaluator_scores)
    report = status.status_report()

    listed, curve = _figures(report)
    assert set(curve) <= set(listed), report
    assert curve, report
    for version, figure in curve.items():
        assert listed[version] == figure, (
            f"v{version}: {listed[version]} listed, {figure} on the curve\n{report}"
        )
    # What the evaluator wrote in between shows on the next report, in both places.
    monkeypatch.setattr(status, "open_sql", real_open_sql)
    listed, curve = _figures(status.status_report())
    assert listed[newest] == curve[newest] == "75.0%"
