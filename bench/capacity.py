"""What one collector, one published version and one replay cost: the inputs of the capacity model.

Four measurements, written to bench/results/capacity.json (docs/performance.md turns them into the
table of what breaks first at 1,000 and 10,000 emulators):

- `collectors`: `--collectors` collectors with the deployment's defaults (4 emulators, batches of 8
  episodes, shards of 16 episodes or 30 s, a registry poll per ~20 s task run, MLflow metrics per
  batch), in threads of this process, against a moto S3 server that counts every request
  (`bench.s3_counter`) and MLflow on SQLite with its artifacts in that bucket. Counted inside a
  window of `--seconds` once all have opened: S3 requests and bytes, MLflow client calls, steps
  and episodes, per collector per minute. The collectors' loop is `flows.collect`'s, without the
  Prefect flow and task runs around it (their API load is `bench.scaling`'s Prefect server CPU).
- `registry`: the published version's size on disk, and what `--fetchers` fresh caches (separate
  machines) cost the registry and the bucket to fetch it once each; then a cached fetch.
- `ingest`: the learner's `Replay.ingest` over shards of 16 collector-sized episodes, from a local
  folder and from S3 (requests per shard).
- `images`: trajectories at their real size (a SimDroid PNG per step): shard bytes per step, ingest
  from S3 keeping screenshots and not, the replay's memory, and bytes `distrl sql` downloads per
  query (bench/_capacity_images.py).
- `replay`: sample (16 and 256 trajectories, with their steps) and priority write-back (256)
  latency at `--replay-sizes` steps of synthetic data.
`ingest` and `replay` are measured by bench/_capacity_replay.py. `--screenshots` (default on)
turns `CollectorParams.screenshots` on for the `collectors` part.

    .venv/bin/python -m bench.capacity [--collectors 2] [--seconds 120] [--step-latency 2.0]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from bench._capacity_images import measure_images
from bench._capacity_replay import measure_ingest, measure_replay
from bench._common import (
    RESULTS,
    episodes_in_window,
    machine,
    prepare,
    publish_warm_start,
    steps_in_window,
    write_result,
)
from bench.s3_counter import S3Counter, counting_s3

if TYPE_CHECKING:
    from mlflow import MlflowClient

BUCKET = "capacity"
DUMMY_KEYS = {
    "AWS_ACCESS_KEY_ID": "AKIACAPACITYBENCH001",
    "AWS_SECRET_ACCESS_KEY": "capacity-bench-not-a-secret",
}


class CountingClient:
    """An `MlflowClient` that counts its calls by method (each is an HTTP request to a tracking server)."""

    def __init__(self, client: Any, calls: Counter[str], lock: threading.Lock) -> None:
        self._client, self._calls, self._lock = client, calls, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def folder_bytes(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def collector_loop(i: int, args: argparse.Namespace, root: Path, stop: threading.Event, out: dict) -> None:
    """`flows.collect`'s loop for one collector, its registry client counted."""
    from flows.collect import next_batches
    from tasks.collector import (
        CollectorParams,
        close_collector,
        flush_shard,
        load_policy_version,
        open_collector,
        poll_policy_version,
        run_batch,
    )
    from tasks.mlflow_metrics import log_metrics, start_tracked_run

    params = CollectorParams(
        pool="capacity",
        collector_id=f"c{i}",
        family="general",
        step_latency_s=args.step_latency,
        task_latency_sigma=args.task_sigma,
        screenshots=args.screenshots,
        seed=args.seed * 1000 + i,
    )
    session = open_collector(params)
    session.registry.cache = root / "caches" / f"collector-{i}"  # each collector its own machine
    # A stand-in that forwards every call: typed as the client it wraps.
    session.registry.client = cast(
        "MlflowClient", CountingClient(session.registry.client, out["mlflow_calls"], out["lock"])
    )
    run_id = start_tracked_run(session.registry, f"collector-c{i}", tags={"role": "collector"}, params={})
    session.mlflow_run_id = run_id
    out["sessions"].append(session)
    seconds_per_batch = None
    try:
        while not stop.is_set():
            version = poll_policy_version(session)
            if version is not None and version != session.version:
                load_policy_version.fn(session, version)
            batches = next_batches(params, seconds_per_batch, session.episodes)
            started = time.monotonic()
            for b in range(batches):
                if b and stop.is_set():
                    break
                stats = run_batch(session)
                metrics = {k: stats[k] for k in ("steps", "episodes", "successes", "policy_version")}
                log_metrics(session.registry, run_id, metrics, step=session.episodes)
            seconds_per_batch = (time.monotonic() - started) / batches
    finally:
        flush_shard.fn(session)
        close_collector(session)
        session.registry.client.set_terminated(run_id)


def measure_collectors(args: argparse.Namespace, root: Path, counter: S3Counter) -> dict:
    out: dict = {"mlflow_calls": Counter(), "lock": threading.Lock(), "sessions": []}
    stop = threading.Event()
    counter.phase = "collectors_opening"
    threads = [
        threading.Thread(target=collector_loop, args=(i, args, root, stop, out), name=f"collector-{i}")
        for i in range(args.collectors)
    ]
    for thread in threads:
        thread.start()
    while len(out["sessions"]) < args.collectors or any(s.version is None for s in out["sessions"]):
        time.sleep(0.2)
    counter.phase = "collectors"
    with out["lock"]:
        out["mlflow_calls"].clear()
    t0 = time.time()
    time.sleep(args.seconds)
    t1 = time.time()
    minutes = (t1 - t0) / 60
    counter.phase = "collectors_stopping"
    with out["lock"]:
        calls = dict(out["mlflow_calls"])
    stop.set()
    for thread in threads:
        thread.join()
    # From the shards (every buffered episode is flushed on stop): a batch is 8 episodes, too
    # coarse to count from the collectors' own totals in a window of a few batches.
    counter.phase = "counting"
    steps = steps_in_window(t0, t1)
    episodes = len(episodes_in_window(t0, t1, started_inside=False))
    per = args.collectors * minutes
    s3 = counter.phase_totals("collectors")
    return {
        "collectors": args.collectors,
        "emulators_per_collector": out["sessions"][0].params.num_envs,
        "window_min": round(minutes, 3),
        "steps_per_min_per_collector": round(steps / per, 2),
        "episodes_per_min_per_collector": round(episodes / per, 2),
        "s3_per_min_per_collector": {k: {m: round(v / per, 2) for m, v in t.items()} for k, t in s3.items()},
        "s3_requests_per_min_per_collector": round(sum(t["requests"] for t in s3.values()) / per, 2),
        "s3_bytes_in_per_step": round(sum(t["bytes_in"] for t in s3.values()) / max(1, steps)),
        "s3_bytes_in_per_s_per_collector": round(sum(t["bytes_in"] for t in s3.values()) / (per * 60), 1),
        "screenshots": args.screenshots,
        "s3_put_prefixes": counter.phase_prefixes("collectors"),
        "mlflow_calls_per_min_per_collector": {k: round(v / per, 2) for k, v in sorted(calls.items())},
        "mlflow_calls_total_per_min_per_collector": round(sum(calls.values()) / per, 2),
        "opening": counter.phase_totals("collectors_opening"),
    }


def measure_registry(args: argparse.Namespace, root: Path, counter: S3Counter, version: int) -> dict:
    from storage.registry import PolicyRegistry

    calls: Counter[str] = Counter()
    lock = threading.Lock()
    fetch_s = []
    counter.phase = "fanout"
    size = None
    for i in range(args.fetchers):
        registry = PolicyRegistry()
        registry.cache = root / "caches" / f"fetcher-{i}"
        registry.client = cast("MlflowClient", CountingClient(registry.client, calls, lock))
        started = time.perf_counter()
        fetched = registry.fetch(version)
        fetch_s.append(time.perf_counter() - started)
        size = folder_bytes(fetched.path)
    fanout_calls = dict(calls)
    calls.clear()
    counter.phase = "fetch_cached"
    registry.fetch(version)  # the last fetcher again: its cache holds the version
    s3 = counter.phase_totals("fanout")
    return {
        "version": version,
        "version_files": size[0] if size else None,
        "version_bytes": size[1] if size else None,
        "fetchers": args.fetchers,
        "s3_per_fetch": {k: {m: round(v / args.fetchers, 1) for m, v in t.items()} for k, t in s3.items()},
        "mlflow_calls_per_fetch": {k: round(v / args.fetchers, 2) for k, v in sorted(fanout_calls.items())},
        "fetch_s_p50": round(float(np.median(fetch_s)), 3),
        "cached_fetch_s3_requests": sum(t["requests"] for t in counter.phase_totals("fetch_cached").values()),
        "cached_fetch_mlflow_calls": dict(calls),
    }


# SmolLM2-135M's shape (its config.json), randomly initialised: the adapter's size depends only on it.
SMOLLM2_135M: dict[str, Any] = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
}


def measure_lora_adapter(workdir: Path) -> dict:
    """Bytes of the LoRA adapter a version of a SmolLM2-135M policy carries (the project's default
    `LoraSettings`, PEFT's `save_pretrained`); the base model is never in a version."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from distrl_core.policy.backbone import apply_lora
    from distrl_core.policy.config import LoraSettings

    model = apply_lora(LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M)), LoraSettings())
    model.save_pretrained(workdir / "adapter")  # type: ignore[operator]
    files, size = folder_bytes(workdir / "adapter")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "shape": "SmolLM2-135M",
        "lora": vars(LoraSettings()),
        "trainable_params": trainable,
        "files": files,
        "bytes": size,
    }


PARTS = ("collectors", "registry", "ingest", "images", "lora", "replay")


def setup_s3(endpoint: str, counter: S3Counter, root: Path, args: argparse.Namespace) -> int:
    """The store and MLflow's artifacts in the counted bucket; the warm start published there."""
    import boto3

    os.environ.update(DUMMY_KEYS | {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint})
    os.environ["MLFLOW_S3_ENDPOINT_URL"] = endpoint
    os.environ["DISTRL_STORE_URI"] = f"s3://{BUCKET}/store"
    os.environ["DISTRL_MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow.db'}"
    os.environ["DISTRL_MLFLOW_ARTIFACT_LOCATION"] = f"s3://{BUCKET}/mlflow"
    os.environ["DISTRL_MLFLOW_CACHE_DIR"] = str(root / "caches" / "publisher")
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    counter.phase = "publish"
    return publish_warm_start(args.warm_start_updates, args.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collectors", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=120.0, help="collectors' measuring window")
    parser.add_argument("--step-latency", type=float, default=2.0, help="median emulator step latency (s)")
    parser.add_argument("--task-sigma", type=float, default=0.0)
    parser.add_argument("--fetchers", type=int, default=8, help="fresh caches fetching one version")
    parser.add_argument("--ingest-shards", type=int, default=200, help="shards of 16 episodes to ingest")
    parser.add_argument(
        "--screenshots",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="collectors store a PNG per step (CollectorParams.screenshots)",
    )
    parser.add_argument(
        "--image-shards", type=int, default=50, help="screenshot-bearing shards (images part)"
    )
    parser.add_argument("--replay-sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warm-start-updates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default=".distrl/bench/capacity")
    parser.add_argument("--out", default="capacity")
    parser.add_argument(
        "--parts",
        nargs="+",
        default=list(PARTS),
        choices=PARTS,
        help="measure only these parts; the others are kept from the existing result file",
    )
    args = parser.parse_args()
    root = prepare(Path(args.root).resolve())
    started = time.monotonic()
    existing = RESULTS / f"{args.out}.json"
    document: dict = (
        json.loads(existing.read_text()) if set(args.parts) < set(PARTS) and existing.exists() else {}
    )
    document["benchmark"] = "capacity"
    document.setdefault("settings", {}).update({part: vars(args) for part in args.parts})
    document.setdefault("machine_per_part", {}).update({part: machine() for part in args.parts})
    if {"collectors", "registry", "ingest", "images"} & set(args.parts):
        with counting_s3() as (endpoint, counter):
            version = setup_s3(endpoint, counter, root, args)
            document["publish_s3"] = counter.phase_totals("publish")
            if "collectors" in args.parts:
                document["collectors"] = measure_collectors(args, root, counter)
                print(json.dumps(document["collectors"]), flush=True)
            if "registry" in args.parts:
                document["registry"] = measure_registry(args, root, counter, version)
                print(json.dumps(document["registry"]), flush=True)
            if "ingest" in args.parts:
                document["ingest"] = [
                    measure_ingest(str(root / "ingest-store"), args.ingest_shards, None, args.seed),
                    measure_ingest(f"s3://{BUCKET}/ingest", args.ingest_shards // 4, counter, args.seed + 1),
                ]
                print(json.dumps(document["ingest"]), flush=True)
            if "images" in args.parts:
                document["images"] = measure_images(BUCKET, counter, args.image_shards, args.seed + 2)
                print(json.dumps(document["images"]), flush=True)
    if "lora" in args.parts:
        document["lora_adapter"] = measure_lora_adapter(root / "lora")
        print(json.dumps(document["lora_adapter"]), flush=True)
    if "replay" in args.parts:
        document["replay"] = measure_replay(args.replay_sizes, args.reps, root / "replay", args.seed)
    document["loadavg_after"] = machine()["loadavg_1_5_15"]  # of the last invocation
    document["total_wall_s"] = round(time.monotonic() - started, 1)
    path = write_result(args.out, document)
    print(json.dumps(document, indent=2, default=str))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
