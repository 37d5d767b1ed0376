"""Collection throughput from 1 to 128 collectors spread over worker processes, relative to linear.

Each configuration runs N real `collect` flow runs (Prefect) split over `--processes` worker
processes (`bench.scaling_worker`, as separate Prefect workers would run them), all talking to one
Prefect API server that this process starts, one SimDroid emulator per collector with
emulator-like latency that really sleeps, the warm-started policy acting on CPU, shards written to
the one store; no learner (it would only take CPU from the collectors; async_vs_sync.py measures
the two together). The window starts once all N collectors have opened and lasts `--seconds`
(`--baseline-seconds` for N=1, whose heavy-tailed throughput is the noisiest); steps and episodes
inside it are read back from the shards.

- `episodes/min`: episodes that ended inside the window, per minute.
- `vs linear`: throughput at N over N x throughput at N=1 (episodes, and steps, which are less noisy).
- `emulator share`: sampled emulator latency inside the window over N x window, i.e. the fraction
  of each collector's time spent waiting on its emulator; its ratio to N=1 is linear scaling with
  the luck of the latency draws taken out (heavy tails make a 1-collector window noisy).
- `cpu`: cores used by the workers and by the Prefect server during the window.

- Collectors store screenshots (`--no-screenshots` to leave them out); the N=1 baseline runs
  `--baseline-repeats` windows, and `vs linear (steps)` comes with the range its 95 % interval gives.
- After the configurations (`--learner-seconds` > 0): bytes per step of the shards written, and the
  learner over them, keeping screenshots and not (`bench._scaling_learner`): ingest rate, replay
  memory, sampled steps per second.

    .venv/bin/python -m bench.scaling [--collectors 1 8 32 64 128] [--processes 2] [--seconds 90]
        [--step-latency 5.0] [--baseline-repeats 3] [--learner-seconds 60] [--out scaling]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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
    save_figure,
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


EMULATOR_SLEEP = "simdroid/faults.py:apply_latency"  # where a collector waits on its emulator


def shares(n: int, processes: int) -> list[int]:
    """`n` collectors over at most `processes` workers, as evenly as they go."""
    k = max(1, min(processes, n))
    return [n // k + (1 if w < n % k else 0) for w in range(k)]


class Workers:
    """The worker processes of one configuration and their status files."""

    def __init__(
        self, n: int, args: argparse.Namespace, root: Path, repeat: int = 0, tree: str | None = None
    ) -> None:
        from flows.child_process import die_with_parent

        name = f"n{n}" if not repeat else f"n{n}_r{repeat}"
        self.folder = root / "workers" / (name if tree is None else f"{name}_{Path(tree).name}")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stop_file = self.folder / "stop"
        self.profile_file = self.folder / "profile"
        self.counts = shares(n, args.processes)
        self.procs: list[subprocess.Popen] = []
        self.status_files = [self.folder / f"w{w}.json" for w in range(len(self.counts))]
        first = 0
        # Workers of another checkout (`--compare-tree`): its code first on the path, from its folder.
        env = None if tree is None else os.environ | {"PYTHONPATH": str(Path(tree).resolve())}
        cwd = None if tree is None else str(Path(tree).resolve())
        for w, count in enumerate(self.counts):
            argv = [sys.executable, "-m", "bench.scaling_worker", "--root", str(root)]
            argv += ["--config", str(n), "--first", str(first), "--count", str(count)]
            argv += ["--step-latency", str(args.step_latency), "--task-sigma", str(args.task_sigma)]
            argv += ["--seed", str(args.seed + 100 * repeat), "--status", str(self.status_files[w])]
            argv += ["--screenshots"] if args.screenshots else []
            argv += ["--stop", str(self.stop_file), "--profile", str(self.profile_file)]
            with open(self.folder / f"w{w}.log", "wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        argv,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=die_with_parent,
                        env=env,
                        cwd=cwd,
                    )
                )
            first += count

    def statuses(self) -> list[dict]:
        found = []
        for path, proc in zip(self.status_files, self.procs, strict=True):
            if proc.poll() is not None:
                tail = (path.parent / f"{path.stem}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"worker {path.stem} exited with {proc.returncode}:\n{tail}")
            found.append(json.loads(path.read_text()) if path.exists() else {"open": 0})
        return found

    def stop(self, timeout_s: float = 600.0) -> None:
        self.stop_file.touch()
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()


def cpu_seconds(pid: int) -> float:
    import psutil

    process = psutil.Process(pid)
    times = [process.cpu_times()]
    for child in process.children(recursive=True):
        try:
            times.append(child.cpu_times())
        except psutil.NoSuchProcess:
            continue
    return sum(t.user + t.system for t in times)


def run_config(
    n: int,
    args: argparse.Namespace,
    root: Path,
    server_pid: int | None,
    repeat: int = 0,
    tree: str | None = None,
) -> dict:
    seconds = args.baseline_seconds if n == 1 else args.seconds
    workers = Workers(n, args, root, repeat, tree)
    opening = time.monotonic()
    try:
        while (
            sum(s["open"] for s in workers.statuses()) < n and time.monotonic() - opening < args.open_timeout
        ):
            time.sleep(0.2)
        open_s = time.monotonic() - opening
        before = workers.statuses()
        collectors_open = sum(s["open"] for s in before)
        load_before = machine()["loadavg_1_5_15"]
        server0 = cpu_seconds(server_pid) if server_pid else 0.0
        t0 = time.time()
        workers.profile_file.touch()
        time.sleep(seconds)
        workers.profile_file.unlink()
        t1 = time.time()
        after = workers.statuses()
        server1 = cpu_seconds(server_pid) if server_pid else 0.0
        load_during = machine()["loadavg_1_5_15"]
    finally:
        workers.stop()
    profiles = [json.loads(p.read_text()) for p in workers.folder.glob("w*.json.profile.json")]
    window = t1 - t0
    steps = steps_in_window(t0, t1)
    ended = episodes_in_window(t0, t1, started_inside=False)
    # Each worker's own clock between its two reports (they come every half second).
    emu = sum(a["emulator_s"] - b["emulator_s"] for a, b in zip(after, before, strict=True))
    collector_s = sum(
        c * (a["time"] - b["time"]) for c, a, b in zip(workers.counts, after, before, strict=True)
    )
    worker_cpu = sum(
        (a["cpu_s"] - b["cpu_s"]) / (a["time"] - b["time"]) for a, b in zip(after, before, strict=True)
    )
    return {
        "collectors": n,
        "repeat": repeat,
        "code": "this checkout" if tree is None else f"--compare-tree {tree}",
        "processes": len(workers.counts),
        "collectors_per_process": workers.counts,
        "window_s": round(window, 2),
        "open_s": round(open_s, 1),
        "collectors_open": collectors_open,
        "steps": steps,
        "episodes_ended": len(ended),
        "steps_per_s": steps / window,
        "episodes_per_min": 60 * len(ended) / window,
        "emulator_share": emu / collector_s,
        "worker_cpu_cores": round(worker_cpu, 3),
        "worker_cpu_ms_per_step": round(1000 * worker_cpu * window / max(1, steps), 1),
        "prefect_server_cpu_cores": round((server1 - server0) / window, 3),
        "loadavg_before": load_before,
        "loadavg_end": load_during,
        "collector_wall_clock_top": (top := merge_profiles(profiles)),
        # The same share as `emulator_share`, sampled from the collectors' stacks: no bias from
        # heavy-tailed sleeps that straddle the window's edges.
        "sampled_emulator_share": top.get(EMULATOR_SLEEP),
        # Share of the collectors' wall-clock with an MLflow frame on the stack (any function).
        "sampled_mlflow_share": merge_tagged(profiles, "mlflow"),
    }


def merge_tagged(profiles: list[dict], tag: str) -> float | None:
    """A tagged share of the collectors' samples over the workers (None: a worker without tags)."""
    total = sum(p["collectors"]["thread_samples"] for p in profiles)
    if not profiles or any(tag not in p["collectors"].get("tagged", {}) for p in profiles):
        return None
    shares = (p["collectors"]["thread_samples"] * p["collectors"]["tagged"][tag] for p in profiles)
    return round(sum(shares) / max(1, total), 4)


def merge_profiles(profiles: list[dict], top: int = 25) -> dict[str, float]:
    """The collectors' inclusive wall-clock shares by function, averaged over the workers (by samples)."""
    total = sum(p["collectors"]["thread_samples"] for p in profiles)
    merged: dict[str, float] = {}
    for p in profiles:
        weight = p["collectors"]["thread_samples"] / max(1, total)
        for key, share in p["collectors"]["inclusive"].items():
            merged[key] = merged.get(key, 0.0) + weight * share
    return {k: round(v, 4) for k, v in sorted(merged.items(), key=lambda kv: -kv[1])[:top]}


def start_prefect_server() -> tuple[object, int | None]:
    """One Prefect API server for every worker process (as a deployment's workers share one)."""
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start(timeout=300)
    os.environ["PREFECT_API_URL"] = server.api_url  # the workers inherit it
    return server, server.server_process.pid if server.server_process else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collectors", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    parser.add_argument("--processes", type=int, default=2, help="worker processes the collectors share")
    parser.add_argument("--seconds", type=float, default=90.0, help="measuring window per configuration")
    parser.add_argument("--baseline-seconds", type=float, default=180.0, help="measuring window at N=1")
    parser.add_argument("--step-latency", type=float, default=5.0, help="median step latency (s)")
    parser.add_argument("--task-sigma", type=float, default=0.0, help="per-episode lognormal spread")
    parser.add_argument(
        "--open-timeout", type=float, default=400.0, help="seconds for all collectors to open"
    )
    parser.add_argument(
        "--baseline-repeats", type=int, default=3, help="windows at N=1, for the baseline's own 95%% interval"
    )
    parser.add_argument(
        "--screenshots",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="collectors store a PNG per step (CollectorParams.screenshots)",
    )
    parser.add_argument(
        "--learner-seconds",
        type=float,
        default=60.0,
        help="learner loop over the shards afterwards (0: none)",
    )
    parser.add_argument("--warm-start-updates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compare-tree",
        default=None,
        help="another checkout (e.g. the code before a change): each configuration runs with its "
        "workers first, then with this checkout's, side by side in the same run",
    )
    parser.add_argument("--root", default=".distrl/bench/scaling")
    parser.add_argument("--out", default="scaling")
    args = parser.parse_args()
    root = prepare(Path(args.root).resolve())
    use_store(root)
    started = time.monotonic()
    before = machine()
    server, server_pid = start_prefect_server()
    try:
        version = publish_warm_start(args.warm_start_updates, args.seed)
        configs: list[dict] = []
        baselines: list[dict] = []
        for n in args.collectors:
            for repeat in range(args.baseline_repeats if n == 1 else 1):
                for tree in [args.compare_tree, None] if args.compare_tree and n > 1 else [None]:
                    result = run_config(n, args, root, server_pid, repeat, tree)
                    print(json.dumps(result), flush=True)
                    (baselines if n == 1 else configs).append(result)
    finally:
        server.stop()  # type: ignore[attr-defined]
    base = baseline(baselines) if baselines else configs[0]
    configs = ([base] if baselines else []) + configs
    for c in configs:
        scale = c["collectors"] / base["collectors"]
        c["vs_linear_episodes"] = c["episodes_per_min"] / (scale * base["episodes_per_min"])
        c["vs_linear_steps"] = c["steps_per_s"] / (scale * base["steps_per_s"])
        if base.get("steps_per_s_ci95"):
            # Against the baseline's interval: the ratio's range if the true 1-collector rate lies in
            # it (no upper end when the interval reaches 0).
            lo, hi = base["steps_per_s_ci95"]
            upper = c["steps_per_s"] / (scale * lo) if lo > 0 else None
            c["vs_linear_steps_ci95"] = [c["steps_per_s"] / (scale * hi), upper]
        c["emulator_share_vs_1"] = c["emulator_share"] / base["emulator_share"]
    last = configs[-1]
    learner_side = learner_part(args, root, version)
    document = {
        "benchmark": "scaling",
        "machine": before,
        "loadavg_after": machine()["loadavg_1_5_15"],
        "settings": vars(args) | {"envs_per_collector": 1, "episodes_per_batch": 1, "learner": False},
        "latency_model": LATENCY_MODEL,
        "configs": configs,
        "baseline_windows": baselines,
        **learner_side,
        "targets": {
            f"vs_linear_episodes at {last['collectors']} >= 0.9": last["vs_linear_episodes"] >= 0.9,
            f"vs_linear_steps at {last['collectors']} >= 0.9": last["vs_linear_steps"] >= 0.9,
            f"emulator_share_vs_1 at {last['collectors']} >= 0.9": last["emulator_share_vs_1"] >= 0.9,
        },
        "total_wall_s": round(time.monotonic() - started, 1),
    }
    document["table"] = print_table(
        [
            "collectors",
            "processes",
            "code",
            "in MLflow (sampled)",
            "episodes/min",
            "vs linear",
            "steps/s",
            "vs linear (steps)",
            "95% (baseline's interval)",
            "emulator share vs 1",
            "worker CPU (cores)",
            "Prefect server CPU",
            "load (1 min)",
        ],
        [
            [
                c["collectors"],
                c["processes"],
                c.get("code", "this checkout"),
                "—" if c.get("sampled_mlflow_share") is None else f"{c['sampled_mlflow_share']:.1%}",
                f"{c['episodes_per_min']:.1f}",
                f"{c['vs_linear_episodes']:.0%}",
                f"{c['steps_per_s']:.2f}",
                f"{c['vs_linear_steps']:.0%}",
                "–".join("∞" if x is None else f"{x:.0%}" for x in c.get("vs_linear_steps_ci95") or [])
                or "—",
                f"{c['emulator_share_vs_1']:.0%}",
                f"{c['worker_cpu_cores']:.2f}",
                f"{c['prefect_server_cpu_cores']:.2f}",
                f"{c['loadavg_end'][0]:.1f}",
            ]
            for c in configs
        ],
    )
    path = write_result(args.out, document)
    plot(document, path.with_suffix(".png"))
    print(json.dumps({k: v for k, v in document.items() if k != "table"}, indent=2, default=str))
    print(f"wrote {path} and {path.with_suffix('.png')}")


def baseline(windows: list[dict]) -> dict:
    """The 1-collector configuration as the mean of its windows, with its 95 % t-interval."""
    from bench._stats import t_interval

    steps = t_interval([w["steps_per_s"] for w in windows])
    merged = dict(windows[0])
    for key in (
        "steps_per_s",
        "episodes_per_min",
        "emulator_share",
        "worker_cpu_cores",
        "worker_cpu_ms_per_step",
    ):
        merged[key] = sum(w[key] for w in windows) / len(windows)
    merged |= {"repeat": "mean", "windows": len(windows), "steps": sum(w["steps"] for w in windows)}
    merged["steps_per_s_ci95"] = steps["ci95"]
    merged["steps_per_s_each"] = [w["steps_per_s"] for w in windows]
    return merged


def learner_part(args: argparse.Namespace, root: Path, version: int) -> dict:
    """Shard bytes of what the collectors wrote, and the learner over it (`bench._scaling_learner`)."""
    from bench._scaling_learner import measure_learner, shard_bytes
    from storage.registry import PolicyRegistry

    store_uri = str(root / "store")
    found: dict = {"shards": shard_bytes(store_uri)}
    if args.learner_seconds > 0:
        policy = PolicyRegistry().fetch(version).path
        found["learner_side"] = [
            measure_learner(store_uri, policy, args.learner_seconds, keep, args.seed)
            for keep in (False, True)
        ]
        print(json.dumps(found), flush=True)
    return found


def plot(document: dict, path: Path) -> None:
    plt = pyplot()
    configs = document["configs"]
    ns = [c["collectors"] for c in configs]
    base = configs[0]["episodes_per_min"] / configs[0]["collectors"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(ns, [c["episodes_per_min"] for c in configs], marker="o", label="measured")
    ax.plot(ns, [n * base for n in ns], linestyle=":", color="grey", label="linear (N x 1 collector)")
    ax.plot(ns, [0.9 * n * base for n in ns], linestyle="--", color="lightgrey", label="90% of linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel(f"collectors (one emulator each) over {document['settings']['processes']} processes")
    ax.set_ylabel("episodes / min")
    ax.set_title(
        f"Collection scaling, median {document['settings']['step_latency']} s/step emulator latency",
        fontsize=10,
    )
    ax.legend()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
