"""The screen-only observation's acting cost per step against the tree's, side by side in one run.

One step is what a demo's collector pays: the tiny policy's act (sampling, as in a demo) plus the
environment's step and its next observation, on SimDroid General test episodes (the tasks in turn,
a new seed per episode). Every mode below plays the same episodes with the same policy weights
and its own sampling stream, and they advance in lockstep, one step of each in turn, so the
machine's load (shared cores) weighs on all of them alike; the ratio to the tree within the run
is the figure that counts.

- ``tree``: the UI dump's elements, no screenshot.
- ``screen_cold``: every screenshot read afresh (no cache of screens, bands or text-line crops):
  what a screen never seen costs.
- ``screen_first``: the shipped reader (all its caches) from empty: the first steps of a run.
- ``screen_steady``: the shipped reader after ``--warmup`` steps of other episodes (other seeds
  of the same tasks): a run under way.
- ``screen_steady_no_screen_cache``: the same without the whole-screen cache, so every screenshot
  is split into bands and only the band and crop caches save work (no screen is a cache hit).
- ``screen_steady_png``: ``screen_steady`` keeping its screenshots in the shards
  (``SimDroidEnvConfig.screenshots``): every new screen drawn and encoded as a PNG, the OCR reading
  the PNG. The other screen modes keep none, as a demo does: the OCR reads the pixels SimDroid
  draws, looked up by the screen's key, and a screen it has read before is not even drawn.

For each screen mode: the share of its time inside the OCR, screens served whole from the cache,
bands detected and crops recognised per step; the caches' entries and pickled bytes at the end.

Run: ``nice -n 5 python -m bench.ocr_acting [--steps 200] [--warmup 600] [--out ocr_acting]``;
writes ``bench/results/<out>.json`` with the load average before and after.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench._common import machine, percentile, write_result
from distrl_core.envs.observation import Observation
from distrl_core.envs.screen import ObservationKind
from simulators.ocr import OcrConfig, OcrReader
from simulators.sim_env import SimDroidEnvConfig

COLD = OcrConfig(cache_screens=0, cache_crops=0, cache_bands=0)
NO_SCREEN_CACHE = OcrConfig(cache_screens=0)


class TimedReader(OcrReader):
    """An OcrReader that adds up the time its reads take (PNG or pixels; for an undrawn SimDroid
    screen, its drawing too) and counts them."""

    def __init__(self, config: OcrConfig) -> None:
        super().__init__(config)
        self.seconds = 0.0
        self.reads = 0

    def _read(self, key: bytes, bgr: Callable[[], Any]) -> tuple[list[Any], tuple[int, int]]:
        started = time.perf_counter()
        out = super()._read(key, bgr)
        self.seconds += time.perf_counter() - started
        self.reads += 1
        return out


@dataclass
class Player:
    """One mode's environment, policy and sampling stream, stepped one step at a time."""

    name: str
    env: Any
    policy: Any
    rng: Any
    tasks: list[Any]
    seed: int
    reader: TimedReader | None = None
    times: list[float] = field(default_factory=list)
    ocr_seconds: float = 0.0  # inside the reader, during the timed steps (resets are not timed)
    episode: int = 0
    current: Observation | None = None

    def start(self) -> None:
        self.current = self.env.reset(self.tasks[0], seed=self.seed)

    def step(self, timed: bool = True) -> None:
        import torch

        assert self.current is not None
        torch.set_rng_state(self.rng)
        ocr_before = self.reader.seconds if self.reader is not None else 0.0
        started = time.perf_counter()
        (output,) = self.policy.act([self.current], greedy=False)
        result = self.env.step(output.action)
        elapsed = time.perf_counter() - started
        self.rng = torch.get_rng_state()
        if timed:
            self.times.append(elapsed)
            if self.reader is not None:
                self.ocr_seconds += self.reader.seconds - ocr_before
        self.current = result.observation
        if result.done:
            self.episode += 1
            self.current = self.env.reset(
                self.tasks[self.episode % len(self.tasks)], seed=self.seed + self.episode
            )


def _player(
    name: str, config: OcrConfig | None, seed: int, tasks: list[Any], keep_screenshots: bool = False
) -> Player:
    import torch

    from distrl_core.policy import Policy, PolicyConfig, default_tokenizer
    from simulators.factory import make_env
    from simulators.screen_env import ScreenEnv

    torch.manual_seed(seed)  # the same weights in every mode
    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=default_tokenizer())
    observation: ObservationKind = "tree" if config is None else "screen"
    env_config = SimDroidEnvConfig(
        screenshots=keep_screenshots, ui_xml=False, seed=seed, observation=observation
    )
    env = make_env(env_config)
    reader = None
    if config is not None:
        assert isinstance(env, ScreenEnv)
        reader = TimedReader(config)
        # As make_env builds it, with a reader of this mode's own: with screenshots off, no PNG at
        # all (the OCR reads the pixels SimDroid draws); kept, every step's PNG is encoded and read.
        env = ScreenEnv(env.env, reader, keep_screenshots=keep_screenshots)
    torch.manual_seed(seed)
    return Player(name, env, policy, torch.get_rng_state(), tasks, seed, reader)


def _summary(player: Player, tree_mean: float) -> dict[str, Any]:
    times = player.times
    mean = statistics.fmean(times)
    out: dict[str, Any] = {
        "steps": len(times),
        "ms_per_step_mean": round(1000 * mean, 2),
        "ms_per_step_p50": round(1000 * (percentile(times, 50) or 0), 2),
        "ms_per_step_p90": round(1000 * (percentile(times, 90) or 0), 2),
        "over_tree": round(mean / tree_mean, 2),
    }
    reader = player.reader
    if reader is not None:
        out["ocr"] = {
            "ms_per_step": round(1000 * player.ocr_seconds / len(times), 2),
            "share_of_step": round(player.ocr_seconds / sum(times), 3),
            "screens_read": reader.reads,
            "screens_from_cache": reader.screen_hits,
            "bands_detected_per_read": round(reader.bands_read / max(1, reader.reads), 2),
            "crops_recognised_per_read": round(reader.recognised / max(1, reader.reads), 2),
            "cache_entries": {
                "screens": len(reader._cache),
                "bands": len(reader._bands),
                "crops": len(reader._crops),
            },
            "cache_pickled_bytes": {
                "screens": len(pickle.dumps(reader._cache)),
                "bands": len(pickle.dumps(reader._bands)),
                "crops": len(pickle.dumps(reader._crops)),
            },
        }
    return out


def acting(steps: int, warmup: int, seed: int) -> dict[str, Any]:
    import torch

    from simulators.simdroid.tasks import load_tasks

    torch.set_num_threads(1)
    tasks = load_tasks("general", "test")
    players = [
        _player("tree", None, seed, tasks),
        _player("screen_cold", COLD, seed, tasks),
        _player("screen_first", OcrConfig(), seed, tasks),
        _player("screen_steady", OcrConfig(), seed, tasks),
        _player("screen_steady_no_screen_cache", NO_SCREEN_CACHE, seed, tasks),
        _player("screen_steady_png", OcrConfig(), seed, tasks, keep_screenshots=True),
    ]
    warmup_seconds = 0.0
    for player in players[3:]:
        # Other episodes first: the same tasks from other seeds, a run under way.
        started = time.perf_counter()
        warm = Player(player.name, player.env, player.policy, player.rng, tasks[1:] + tasks[:1], seed + 7919)
        warm.start()
        for _ in range(warmup):
            warm.step(timed=False)
        assert player.reader is not None
        player.reader.seconds, player.reader.reads, player.reader.screen_hits = 0.0, 0, 0
        player.reader.bands_read = player.reader.recognised = 0
        player.policy._encode.cache_clear()  # the policy's prompt cache starts empty in every mode
        warmup_seconds += time.perf_counter() - started
    load_before = machine()["loadavg_1_5_15"]
    for player in players:
        player.start()
    for _ in range(steps):
        for player in players:
            player.step()
    tree_mean = statistics.fmean(players[0].times)
    return {
        "warmup_steps": warmup,
        "warmup_seconds": round(warmup_seconds, 1),
        "loadavg_at_measurement_start": load_before,
        "modes": {player.name: _summary(player, tree_mean) for player in players},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="measured steps per mode")
    parser.add_argument("--warmup", type=int, default=600, help="steps of other episodes before steady")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="ocr_acting", help="result name under bench/results/")
    args = parser.parse_args()
    document: dict[str, Any] = {"bench": "ocr_acting", "machine_before": machine(), "seed": args.seed}
    document["settings"] = {"ocr": vars(OcrConfig()), "device": "SimDroidConfig().readable()"}
    started = time.perf_counter()
    document["acting"] = acting(args.steps, args.warmup, args.seed)
    document["seconds"] = round(time.perf_counter() - started, 1)
    document["machine_after"] = machine()
    path = write_result(args.out, document)
    for name, mode in document["acting"]["modes"].items():
        print(name, mode["ms_per_step_mean"], mode["ms_per_step_p50"], mode["over_tree"], mode.get("ocr"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
