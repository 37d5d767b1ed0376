"""`CollectorParams.screenshots`, the one setting of a deployment's collectors, reaches their shards:
an image per step with it on (bytes per step in the kilobytes), none without."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from storage.store import open_store
from tasks.collector import CollectorParams, close_collector, flush_shard, open_collector, run_batch

ROOT = Path(__file__).resolve().parents[2]
# A SimDroid screen at the default quarter scale is a PNG of several kilobytes; a step's text
# fields compress to ~130 bytes. Between the two, with room on both sides.
IMAGE_STEP_BYTES = 1_000


def _collect(tmp_path: Path, make_policy, screenshots: bool) -> tuple[Path, int]:
    """The one shard a collector wrote after a batch, and the steps in it."""
    store_uri = str(tmp_path / ("with" if screenshots else "without"))
    params = CollectorParams(
        collector_id="shots" if screenshots else "plain",
        num_envs=2,
        episodes_per_batch=2,
        flush_seconds=0,
        store_uri=store_uri,
        screenshots=screenshots,
        seed=5,
    )
    session = open_collector(params)
    try:
        session.policy, session.version = make_policy(seed=1), 1
        stats = run_batch(session)
        assert flush_shard.fn(session) is not None
    finally:
        close_collector(session)
    store = open_store(store_uri)
    (path,) = [p for p in store.fs.find(store.trajectories) if p.endswith(".parquet")]
    return Path(path), int(stats["steps"])


def test_screenshots_on_store_an_image_per_step(tmp_path: Path, make_policy) -> None:
    path, steps = _collect(tmp_path, make_policy, screenshots=True)
    column = pq.read_table(path, columns=["screenshot_png"]).column("screenshot_png")
    assert column.null_count == 0 and len(column) == steps
    assert all(png.as_py().startswith(b"\x89PNG") for png in column)
    assert path.stat().st_size / steps > IMAGE_STEP_BYTES


def test_screenshots_off_store_no_image(tmp_path: Path, make_policy) -> None:
    path, steps = _collect(tmp_path, make_policy, screenshots=False)
    assert pq.read_table(path, columns=["screenshot_png"]).column("screenshot_png").null_count == steps
    assert path.stat().st_size / steps < IMAGE_STEP_BYTES


@pytest.mark.parametrize("deployment", ["collect-pool-a", "collect-pool-b"])
def test_the_collector_deployments_offer_the_setting(deployment: str) -> None:
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    (collect,) = [d for d in deployments if d["name"] == deployment]
    assert CollectorParams(**collect["parameters"]["params"]).screenshots is False
    assert "screenshots" in collect["parameters"]["params"]
