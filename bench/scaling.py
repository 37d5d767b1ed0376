"""Collection throughput from 1 to 32 collectors, relative to linear scaling.

Each configuration runs N real `collect` flow runs (Prefect) in threads of this process, one
SimDroid emulator each with emulator-like latency that really sleeps, the warm-started policy
acting on CPU, shards written to the store; no learner (it would only take CPU from the
collectors; async_vs_sync.py measures the two together). The window starts once all N collectors
have opened and lasts `--seconds`; steps and episodes inside it are read back from the shards.

- `vs linear`: steps/s at N over N x steps/s at N=1.
- `emulator share`: sampled emulator latency inside the window over N x window, i.e. the fraction
  of each collector's time spent waiting on its emulator; its ratio to N=1 is linear scaling with
  the luck of the latency draws taken out (heavy tails make a 1-collector window noisy).

    .venv/bin/python -m bench.scaling [--collectors 1 2 4 8 16 32] [--seconds 60]
        [--step-latency 1.0] [--out bench/results/scaling.json]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench._common import (
    LATENCY_MODEL,
    episodes_in_window,
    machine,
    prepare,
    print_table,
    publish_warm_start,
    pyplot,
    steps_in_window,
    use_store,
    write_result,
)

if TYPE_CHECKING:
    from tasks.stop import StopToken


def emulator_seconds(run: StopToken) -> float:
    """Total sampled emulator latency of the run's open collectors so far."""
    from tasks.collector import CollectorSession

    return sum(env.device.virtual_time_s for s in run.open_sessions(CollectorSession) for env in s.envs)


def run_config(n: int, args: argparse.Namespace) -> dict:
    from flows.train_local import _collector_thread
    from tasks.collector import CollectorParams, CollectorSession
    from tasks.stop import StopToken

    stop = StopToken()
    threads = [
        threading.Thread(
            target=_collector_thread,  # started again if the local API refuses the flow run
            args=(
                CollectorParams(
                    pool="bench",
                    collector_id=f"n{n}_c{i}",
                    num_envs=1,
                    episodes_per_batch=1,
                    family="general",
                    flush_episodes=4,
                    flush_seconds=10,
                    step_latency_s=args.step_latency,
                    task_latency_sigma=args.task_sigma,
                    # Episode ids derive from the seed: distinct per configuration in the one store.
                    seed=args.seed * 1_000_000 + n * 1000 + i,
                ),
                stop,
                {},
            ),
            name=f"collector-{i}",
        )
        for i in range(n)
    ]
    opening = time.monotonic()
    for thread in threads:
        thread.start()
        time.sleep(0.2)  # as train_local: no burst of flow-run creations on the local API
    while len(stop.open_sessions(CollectorSession)) < n and time.monotonic() - opening < 180:
        time.sleep(0.1)
    open_s = time.monotonic() - opening
    collectors_open = len(stop.open_sessions(CollectorSession))
    load_before = machine()["loadavg_1_5_15"]
    t0, emu0 = time.time(), emulator_seconds(stop)
    time.sleep(args.seconds)
    t1, emu1 = time.time(), emulator_seconds(stop)
    load_during = machine()["loadavg_1_5_15"]
    stop.set()
    for thread in threads:
        thread.join()
    stop.close()
    window = t1 - t0
    steps = steps_in_window(t0, t1)
    episodes = episodes_in_window(t0, t1)
    return {
        "collectors": n,
        "window_s": round(window, 2),
        "open_s": round(open_s, 1),
        "collectors_open": collectors_open,
        "steps": steps,
        "episodes": len(episodes),
        "steps_per_s": steps / window,
        "episodes_per_s": len(episodes) / window,
        "emulator_share": (emu1 - emu0) / (n * window),
        "loadavg_before": load_before,
        "loadavg_end": load_during,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collectors", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--seconds", type=float, default=60.0, help="measuring window per configuration")
    parser.add_argument("--step-latency", type=float, default=1.0, help="median step latency (s)")
    parser.add_argument("--task-sigma", type=float, default=0.0, help="per-episode lognormal spread")
    parser.add_argument("--warm-start-updates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default=".distrl/bench/scaling")
    parser.add_argument("--out", default="scaling")
    args = parser.parse_args()
    root = prepare(Path(args.root).resolve())
    use_store(root)
    started = time.monotonic()
    before = machine()
    publish_warm_start(args.warm_start_updates, args.seed)
    configs = []
    for n in args.collectors:
        configs.append(run_config(n, args))
        print(json.dumps(configs[-1]), flush=True)
    base = next((c for c in configs if c["collectors"] == 1), configs[0])
    for c in configs:
        scale = c["collectors"] / base["collectors"]
        c["vs_linear"] = c["steps_per_s"] / (scale * base["steps_per_s"])
        c["emulator_share_vs_1"] = c["emulator_share"] / base["emulator_share"]
    last = configs[-1]
    document = {
        "benchmark": "scaling",
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "settings": vars(args) | {"envs_per_collector": 1, "episodes_per_batch": 1, "learner": False},
        "latency_model": LATENCY_MODEL,
        "configs": configs,
        "targets": {
            f"vs_linear at {last['collectors']} >= 0.9": last["vs_linear"] >= 0.9,
            f"emulator_share_vs_1 at {last['collectors']} >= 0.9": last["emulator_share_vs_1"] >= 0.9,
        },
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    document["table"] = print_table(
        ["collectors", "steps/s", "episodes/s", "vs linear", "emulator share", "share vs 1"],
        [
            [
                c["collectors"],
                f"{c['steps_per_s']:.2f}",
                f"{c['episodes_per_s']:.2f}",
                f"{c['vs_linear']:.0%}",
                f"{c['emulator_share']:.0%}",
                f"{c['emulator_share_vs_1']:.0%}",
            ]
            for c in configs
        ],
    )
    path = write_result(args.out, document)
    plot(document, path.with_suffix(".png"))
    print(json.dumps({k: v for k, v in document.items() if k != "table"}, indent=2, default=str))
    print(f"wrote {path} and {path.with_suffix('.png')}")


def plot(document: dict, path: Path) -> None:
    plt = pyplot()
    configs = document["configs"]
    ns = [c["collectors"] for c in configs]
    base = configs[0]["steps_per_s"] / configs[0]["collectors"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(ns, [c["steps_per_s"] for c in configs], marker="o", label="measured")
    ax.plot(ns, [n * base for n in ns], linestyle=":", color="grey", label="linear (N x 1 collector)")
    ax.plot(ns, [0.9 * n * base for n in ns], linestyle="--", color="lightgrey", label="90% of linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("collectors (one emulator each)")
    ax.set_ylabel("environment steps / s")
    ax.set_title(
        f"Collection scaling, median {document['settings']['step_latency']} s/step emulator latency",
        fontsize=10,
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
