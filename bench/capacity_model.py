"""The capacity model: every limit of the system at 1,000 and 10,000 emulators, ranked by where it breaks.

A limit is a resource with a demand per emulator (units per second that one emulator causes) and a
capacity (units per second it sustains); it breaks at capacity / demand emulators. Each side is
marked `measured` (read from bench/results/capacity.json or scaling.json, with the key it came
from) or `estimated` (a stated assumption). Central limits (one learner, one registry, one Prefect
API) are ranked for what breaks first; per-machine limits scale out with machines and are listed
beside them.

    .venv/bin/python -m bench.capacity_model [--emulators 1000 10000] [--steps-per-emulator-min 10]

reads the two result files and writes bench/results/capacity_model.json with the ranked table
(docs/performance.md "Capacity model" shows it).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Literal

Source = Literal["measured", "estimated"]


@dataclass(frozen=True)
class Limit:
    resource: str
    unit: str
    demand_per_emulator: float  # units/s one emulator causes
    capacity: float  # units/s the resource sustains
    demand_source: Source
    capacity_source: Source
    central: bool = True  # one for the whole deployment (False: per machine, scales out)
    basis: str = ""  # where the numbers come from

    @property
    def source(self) -> Source:
        """`measured` only when both sides are."""
        both = self.demand_source == self.capacity_source == "measured"
        return "measured" if both else "estimated"

    @property
    def breaks_at(self) -> float:
        """Emulators at which demand reaches capacity."""
        return self.capacity / self.demand_per_emulator if self.demand_per_emulator > 0 else float("inf")


def rank_limits(limits: list[Limit], emulators: list[int]) -> list[dict]:
    """The limits from the first to break to the last (central ones first, then per machine), each
    with its load (demand / capacity) at every count in `emulators`."""
    ordered = sorted(limits, key=lambda limit: (not limit.central, limit.breaks_at))
    rows = []
    for limit in ordered:
        row = asdict(limit) | {"source": limit.source, "breaks_at_emulators": limit.breaks_at}
        row["load"] = {str(n): limit.demand_per_emulator * n / limit.capacity for n in emulators}
        rows.append(row)
    return rows


def breaks_first(limits: list[Limit], emulators: int) -> Limit | None:
    """The central limit that breaks first, if any is over capacity at `emulators`."""
    over = [x for x in limits if x.central and x.demand_per_emulator * emulators > x.capacity]
    return min(over, key=lambda x: x.breaks_at) if over else None


# ----- the limits, from the measured results ------------------------------------------------------
# Stated assumptions (estimated): what a real deployment adds to what this machine measured.
EMULATORS_PER_COLLECTOR = 4  # the collect deployment's num_envs
EMULATORS_PER_MACHINE = 16
PUBLISH_EVERY_S = 30.0
LEARNER_NIC_BYTES_PER_S = 1.25e9  # 10 Gbit/s
MLFLOW_PROXY_BYTES_PER_S = 117e6  # one proxying MLflow server on 1 Gbit/s
MLFLOW_CALLS_PER_S = 100.0  # one MLflow server worker on PostgreSQL, small requests
PREFECT_SQLITE_TASK_RUNS_PER_S = 5.0  # `database is locked` seen at 2 collectors under load
PREFECT_POSTGRES_TASK_RUNS_PER_S = 100.0
S3_PUTS_PER_PREFIX_PER_S = 3500.0  # AWS's documented per-prefix rate
LIST_PAGES_PER_SCAN = 600.0  # a scan within a minute at ~0.1 s a 1,000-key page
REPLAY_RAM_BYTES = 64 * 2**30
REPLAY_WINDOW_S = 600.0  # the replay holds the last 10 minutes of collection
LORA_NOTE = "a SmolLM2-135M LoRA version"


def build_limits(capacity: dict, scaling: dict, steps_per_emulator_s: float) -> list[Limit]:
    """Every limit, from the two result documents (`bench.capacity`, `bench.scaling`)."""
    step = steps_per_emulator_s  # collected steps/s per emulator
    collectors = capacity["collectors"]
    per_collector_min = 60 * EMULATORS_PER_COLLECTOR  # a collector-minute, in emulator-seconds
    images = capacity.get("images", {})
    ingest_s3 = next(i for i in images.get("ingest", []) if not i["keep_screenshots"])
    ingest_keep = next(i for i in images.get("ingest", []) if i["keep_screenshots"])
    learner = next(x for x in scaling["learner_side"] if not x["keep_screenshots"])["learner"]
    batch_steps = learner["sampled_steps"] / max(1, learner["updates"])
    shard_bytes = images.get("shard_bytes_per_step") or collectors["s3_bytes_in_per_step"]
    version = capacity["lora_adapter"]["bytes"]
    # CPU per step at the largest configuration: one collector alone carries a process's fixed costs.
    cpu_s = max(scaling["configs"], key=lambda c: c["collectors"])["worker_cpu_ms_per_step"] / 1000
    return [
        Limit(
            "learner: replay sampling", "sampled steps/s", step,
            batch_steps / (learner["sample_ms_per_update"] / 1000), "estimated", "measured",
            basis=f"sample 16 trajectories: {learner['sample_ms_per_update']} ms for {batch_steps:.0f} steps "
            "(scaling.json learner_side); demand: each collected step sampled once",
        ),
        Limit(
            "learner: update (Learner.update + write-back)", "sampled steps/s", step,
            batch_steps / (learner["update_ms_per_update"] / 1000), "estimated", "measured",
            basis=f"{learner['update_ms_per_update']} ms an update of 16 trajectories, tiny policy, 1 CPU "
            "thread (scaling.json learner_side); demand: each collected step trained on once",
        ),
        Limit(
            "learner: sample then update, one thread (one learner)", "sampled steps/s", step,
            learner["sampled_steps_per_s"], "estimated", "measured",
            basis=f"{learner['sampled_steps_per_s']} sampled steps/s measured (scaling.json learner_side; the "
            "learner's prefetch thread overlaps the two, so the update alone is the better bound)",
        ),
        Limit(
            "learner ingest, screenshot shards from S3", "steps/s", step, ingest_s3["steps_per_s"],
            "estimated", "measured", basis="capacity.json images.ingest (replay drops screenshots)",
        ),
        Limit(
            "learner ingest, keeping screenshots", "steps/s", step, ingest_keep["steps_per_s"],
            "estimated", "measured", basis="capacity.json images.ingest (keep_screenshots)",
        ),
        Limit(
            "learner download, keeping screenshots", "bytes/s", step * shard_bytes, LEARNER_NIC_BYTES_PER_S,
            "measured", "estimated", basis=f"{shard_bytes} shard bytes per step (capacity.json images); a 10 Gbit/s NIC",
        ),
        Limit(
            "replay memory, 10 minutes of screenshot steps", "bytes", REPLAY_WINDOW_S * step
            * ingest_keep["replay_duckdb_bytes_per_step"], REPLAY_RAM_BYTES, "measured", "estimated",
            basis=f"{ingest_keep['replay_duckdb_bytes_per_step']} DuckDB bytes per step kept (capacity.json); 64 GiB",
        ),
        Limit(
            "S3 PUTs per prefix (a pool's shards)", "PUT/s", collectors["s3_requests_per_min_per_collector"]
            / per_collector_min, S3_PUTS_PER_PREFIX_PER_S, "measured", "estimated",
            basis="capacity.json collectors; AWS's 3,500 PUT/s per prefix",
        ),
        Limit(
            "shard discovery (LIST pages per scan)", "pages", collectors["s3_requests_per_min_per_collector"]
            / per_collector_min * 86_400 * 2 / 1000, LIST_PAGES_PER_SCAN, "measured", "estimated",
            basis="two days' shards listed per scan, 1,000 keys a page; a scan within a minute",
        ),
        Limit(
            f"registry downloads ({LORA_NOTE})", "bytes/s", version / EMULATORS_PER_MACHINE / PUBLISH_EVERY_S,
            MLFLOW_PROXY_BYTES_PER_S, "estimated", "estimated",
            basis=f"{version} bytes a version (capacity.json lora_adapter), one download per machine of "
            f"{EMULATORS_PER_MACHINE} emulators per {PUBLISH_EVERY_S:.0f} s publish; one proxying MLflow server",
        ),
        Limit(
            "MLflow calls (polls, metrics, version switches)", "calls/s",
            collectors["mlflow_calls_total_per_min_per_collector"] / per_collector_min
            + 1 / EMULATORS_PER_COLLECTOR / PUBLISH_EVERY_S, MLFLOW_CALLS_PER_S, "measured", "estimated",
            basis="capacity.json collectors + a get_model_version per collector per publish",
        ),
        Limit(
            "Prefect API on PostgreSQL (task runs)", "task runs/s", 3.7 / per_collector_min,
            PREFECT_POSTGRES_TASK_RUNS_PER_S, "measured", "estimated",
            basis="3.7 task runs per collector-minute (docs: the distributed stack on one machine); "
            f"`distrl up --database postgres`. On SQLite (~{PREFECT_SQLITE_TASK_RUNS_PER_S:.0f}/s) it breaks at "
            f"~{PREFECT_SQLITE_TASK_RUNS_PER_S / (3.7 / per_collector_min):.0f} emulators",
        ),
        Limit(
            "collector CPU, per worker process (one GIL)", "CPU s/s", step * cpu_s, 1.0, "measured", "measured",
            central=False, basis=f"{cpu_s * 1000:.0f} ms of CPU per step with screenshots (scaling.json)",
        ),
        Limit(
            "collector upload, per worker machine", "bytes/s", step * shard_bytes, MLFLOW_PROXY_BYTES_PER_S,
            "measured", "estimated", central=False, basis="shard bytes per step; a 1 Gbit/s NIC",
        ),
    ]  # fmt: skip


def main() -> None:
    from bench._common import RESULTS, machine, write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulators", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--steps-per-emulator-min", type=float, default=10.0, help="a real emulator's pace")
    parser.add_argument("--out", default="capacity_model")
    args = parser.parse_args()
    capacity = json.loads((RESULTS / "capacity.json").read_text())
    scaling = json.loads((RESULTS / "scaling.json").read_text())
    limits = build_limits(capacity, scaling, args.steps_per_emulator_min / 60)
    rows = rank_limits(limits, args.emulators)
    first = {str(n): (x.resource if (x := breaks_first(limits, n)) else None) for n in args.emulators}
    document = {
        "benchmark": "capacity_model",
        "machine": machine(),
        "settings": vars(args),
        "inputs": {"capacity": capacity.get("machine_per_part"), "scaling": scaling.get("machine")},
        "limits": rows,
        "breaks_first": first,
    }
    document["table"] = markdown(rows, args.emulators)
    path = write_result(args.out, document)
    print(document["table"])
    print(f"breaks first: {first}; wrote {path}")


def breaks_at(row: dict) -> str:
    if row["breaks_at_emulators"] == float("inf"):
        return "never"
    return f"{row['breaks_at_emulators']:,.0f}" + ("" if row["central"] else " per process or machine")


def markdown(rows: list[dict], emulators: list[int]) -> str:
    """The ranked limits as the docs' table."""
    head = ["#", "limit", "demand per emulator", "capacity", "breaks at (emulators)"]
    head += [f"load at {n:,}" for n in emulators] + ["measured or estimated", "basis"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows, 1):
        cells = [
            str(i) if r["central"] else "per machine",
            r["resource"],
            f"{r['demand_per_emulator']:.3g} {r['unit']}",
            f"{r['capacity']:,.4g} {r['unit']}",
            breaks_at(r),
            *(f"{r['load'][str(n)]:.2f}" if r["central"] else "scales out" for n in emulators),
            f"demand {r['demand_source']}, capacity {r['capacity_source']}",
            r["basis"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
