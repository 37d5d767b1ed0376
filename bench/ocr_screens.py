"""The screen-only observation measured: OCR against SimDroid's truth, and acting cost per step.

Part 1, ``--screens N`` (1,000 by default): SimDroid screens visited by the noisy scripted expert
(noise 0.3, distractor dialogs at 10 %, every task of both families and both splits in turn, so
launchers, settings pages, the clock, the browser, shops, dialogs and focused fields all appear),
drawn readable (``SimDroidConfig.readable``: DejaVu Sans, half-size screenshots). Each screenshot
is read by the OCR (``simulators.ocr``) into elements (``distrl_core.envs.screen``) and compared
with the screen's truth, its UI-dump elements that draw text:

- **recall**: truth elements an OCR element reads (``text_key`` equal, else difflib ratio >= 0.8,
  else the prefix of a label the screen cut short), matched one to one, the nearest first;
- **centre inside**: of those, the OCR box's centre inside the truth's bounds (a tap there hits it);
- **exact text**: of those, the OCR's text equal to the label up to case and runs of spaces (what
  a word-level tokenizer sees).

Elements that draw no text (sliders, icon buttons known by their description) cannot be read by an
OCR and are counted apart (``textless``).

Part 2, ``--acting-steps N`` (200): the cost of one step (the policy's act plus the environment's
step and observation) with a fresh tiny policy, one environment, the tree observation against the
screen one, on the same tasks and seeds. Load is recorded before and after (``machine()``).

Run: ``nice -n 5 python -m bench.ocr_screens [--screens 1000] [--acting-steps 200] [--out NAME]``;
writes ``bench/results/ocr_screens.json``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench._common import machine, percentile, write_result
from distrl_core.envs.observation import UIElement
from distrl_core.envs.screen import screen_elements, text_key
from simulators.ocr import OcrConfig, OcrReader
from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
from simulators.simdroid.device import SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks

NOISE = 0.3
SIMILARITY = 0.8


def readable_truth(elements: tuple[UIElement, ...]) -> tuple[list[tuple[UIElement, str]], int]:
    """(element, the text SimDroid draws for it) of the elements that draw text, and how many do not."""
    readable, textless = [], 0
    for element in elements:
        if element.class_name.endswith("SeekBar"):
            textless += 1  # a slider draws a track, not its percentage
        elif element.text:
            readable.append((element, element.text))
        elif element.editable and element.content_desc:
            readable.append((element, element.content_desc))  # an empty field shows its hint
        else:
            textless += 1  # an icon known by its description only
    return readable, textless


def _similar(read: str, truth: str) -> bool:
    import difflib

    a, b = text_key(read), text_key(truth)
    if not a or not b:
        return False
    if a == b or difflib.SequenceMatcher(None, a, b).ratio() >= SIMILARITY:
        return True
    return len(a) >= 4 and b.startswith(a[:-1])  # cut short on screen ("Apex Tent Pro 2-pe~")


@dataclass
class Match:
    truth: UIElement
    text: str
    read: UIElement | None

    @property
    def inside(self) -> bool:
        if self.read is None:
            return False
        x, y = self.read.center
        x1, y1, x2, y2 = self.truth.bounds
        return x1 <= x < x2 and y1 <= y < y2

    @property
    def exact(self) -> bool:
        return self.read is not None and " ".join(self.read.text.split()).casefold() == self.text.casefold()


def match_screen(truth: list[tuple[UIElement, str]], read: tuple[UIElement, ...]) -> list[Match]:
    """One OCR element per truth element at most: the nearest of those that read its text."""
    pairs = []
    for t, (element, text) in enumerate(truth):
        cx, cy = element.center
        for r, candidate in enumerate(read):
            if _similar(candidate.text, text):
                rx, ry = candidate.center
                pairs.append(((rx - cx) ** 2 + (ry - cy) ** 2, t, r))
    matches = [Match(element, text, None) for element, text in truth]
    used_t: set[int] = set()
    used_r: set[int] = set()
    for _, t, r in sorted(pairs):
        if t not in used_t and r not in used_r:
            matches[t].read = read[r]
            used_t.add(t)
            used_r.add(r)
    return matches


def screens(count: int, seed: int) -> list[tuple[tuple[UIElement, ...], bytes, tuple[int, int]]]:
    """``count`` screens (truth elements, readable screenshot, screen size) the noisy expert visits."""
    device = SimDroidConfig(distractor_prob=0.1, seed=seed).readable()
    env = SimDroidEnv(SimDroidEnvConfig(device=device, screenshots=True, ui_xml=False, seed=seed))
    tasks = load_tasks(None, "train") + load_tasks(None, "test")
    random.Random(seed).shuffle(tasks)
    rng = random.Random(seed)
    out: list[tuple[tuple[UIElement, ...], bytes, tuple[int, int]]] = []
    episode = 0
    while len(out) < count:
        task = tasks[episode % len(tasks)]
        observation = env.reset(task, seed=seed * 100_000 + episode)
        episode += 1
        done = False
        while len(out) < count:
            assert observation.screenshot_png is not None
            out.append((observation.elements, observation.screenshot_png, observation.screen_size))
            if done:
                break
            result = env.step(expert_action(env, task, noise=NOISE, rng=rng))
            observation, done = result.observation, result.done
    return out


def ocr_accuracy(
    count: int, seed: int, progress: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Part 1; ``progress`` gets the summary so far every 100 screens (a long run on a loaded
    machine leaves its partial figures behind if it is stopped)."""
    reader = OcrReader(OcrConfig())
    reader.read(screens(1, seed + 1)[0][1])  # load the models outside the measurement
    matches: list[Match] = []
    textless = extra = 0
    seconds: list[float] = []
    misses: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    for done, (truth_elements, png, size) in enumerate(screens(count, seed), start=1):
        started = time.perf_counter()
        boxes, shot = reader.read(png)
        read = screen_elements(boxes, shot, size)
        seconds.append(time.perf_counter() - started)
        truth, no_text = readable_truth(truth_elements)
        textless += no_text
        screen_matches = match_screen(truth, read)
        matches += screen_matches
        extra += len(read) - sum(m.read is not None for m in screen_matches)
        for m in screen_matches:
            if m.read is None or not m.inside:
                kind = m.truth.short_class + (" missed" if m.read is None else " centre outside")
                misses[kind] = misses.get(kind, 0) + 1
                if len(examples) < 25:
                    examples.append(
                        {"truth": m.text, "bounds": m.truth.bounds, "read": m.read and m.read.text}
                    )
        if progress is not None and done % 100 == 0 and done < count:
            progress(_summary(done, matches, textless, extra, seconds, misses, examples))
    return _summary(count, matches, textless, extra, seconds, misses, examples)


def _summary(
    count: int,
    matches: list[Match],
    textless: int,
    extra: int,
    seconds: list[float],
    misses: dict[str, int],
    examples: list[dict[str, Any]],
) -> dict[str, Any]:
    found = [m for m in matches if m.read is not None]
    return {
        "screens": count,
        "truth_elements_with_text": len(matches),
        "textless_elements": textless,
        "recall": round(len(found) / max(1, len(matches)), 4),
        "centre_inside": round(sum(m.inside for m in found) / max(1, len(found)), 4),
        "tappable_recall": round(sum(m.inside for m in matches) / max(1, len(matches)), 4),
        "exact_text": round(sum(m.exact for m in found) / max(1, len(found)), 4),
        "unmatched_ocr_elements": extra,
        "ocr_ms_per_screen": {
            "mean": round(1000 * statistics.fmean(seconds), 1),
            "p50": round(1000 * (percentile(seconds, 50) or 0), 1),
            "p90": round(1000 * (percentile(seconds, 90) or 0), 1),
        },
        "misses_by_kind": dict(sorted(misses.items(), key=lambda kv: -kv[1])),
        "miss_examples": examples,
    }


def acting_cost(steps: int, seed: int) -> dict[str, Any]:
    """ms per step (act + env step + observation), tree against screen, same tasks and seeds."""
    import torch

    from distrl_core.policy import Policy, PolicyConfig, default_tokenizer
    from simulators.factory import make_env

    torch.set_num_threads(1)
    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=default_tokenizer())
    tasks = load_tasks("general", "test")
    result: dict[str, Any] = {}
    for observation in ("tree", "screen"):
        env = make_env(SimDroidEnvConfig(screenshots=False, ui_xml=False, seed=seed, observation=observation))
        torch.manual_seed(seed)
        times: list[float] = []
        episode = 0
        current = env.reset(tasks[0], seed=seed)
        while len(times) < steps:
            started = time.perf_counter()
            (output,) = policy.act([current], greedy=False)
            step = env.step(output.action)
            times.append(time.perf_counter() - started)
            current = step.observation
            if step.done:
                episode += 1
                current = env.reset(tasks[episode % len(tasks)], seed=seed + episode)
        result[observation] = {
            "steps": len(times),
            "ms_per_step_mean": round(1000 * statistics.fmean(times), 1),
            "ms_per_step_p50": round(1000 * (percentile(times, 50) or 0), 1),
        }
    result["screen_over_tree"] = round(
        result["screen"]["ms_per_step_mean"] / result["tree"]["ms_per_step_mean"], 1
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screens", type=int, default=1000, help="screens read (0: skip part 1)")
    parser.add_argument("--acting-steps", type=int, default=200, help="steps per mode (0: skip part 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="ocr_screens", help="result name under bench/results/")
    args = parser.parse_args()
    document: dict[str, Any] = {"bench": "ocr_screens", "machine_before": machine(), "seed": args.seed}
    document["settings"] = {"ocr": vars(OcrConfig()), "device": "SimDroidConfig().readable()", "noise": NOISE}
    started = time.perf_counter()
    if args.screens:

        def partial(summary: dict[str, Any]) -> None:
            write_result(args.out, {**document, "ocr": {**summary, "partial": True}})
            print(f"{summary['screens']} screens: recall {summary['recall']}", flush=True)

        document["ocr"] = ocr_accuracy(args.screens, args.seed, partial)
    if args.acting_steps:
        document["acting"] = acting_cost(args.acting_steps, args.seed)
    document["seconds"] = round(time.perf_counter() - started, 1)
    document["machine_after"] = machine()
    path = write_result(args.out, document)
    summary = {k: document.get(k) for k in ("ocr", "acting")}
    for part in summary.values():
        if part:
            part.pop("miss_examples", None)
    print(summary)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
