"""The screen-only observation measured: OCR against SimDroid's truth (recall, taps inside, exact text).

``--screens N`` (1,000 by default): SimDroid screens visited by the noisy scripted expert
(noise 0.3, distractor dialogs at 10 %, every task of both families and both splits in turn, so
launchers, settings pages, the clock, the browser, shops, dialogs and focused fields all appear),
drawn readable (``SimDroidConfig.readable``: DejaVu Sans, half-size screenshots). Each screenshot
is read by the OCR (``simulators.ocr``) into elements (``distrl_core.envs.screen``) and compared
with the screen's truth, its UI-dump elements that draw text, each with the text it draws (an
unfocused text field shows what its widget holds, e.g. the browser bar's page address, where the
dump holds the text last typed into it: ``drawn_fields``):

- **recall**: truth elements an OCR element reads (``text_key`` equal, else difflib ratio >= 0.8,
  else the prefix of a label the screen cut short), matched one to one, the nearest first;
- **centre inside**: of those, the OCR box's centre inside the truth's bounds (a tap there hits it);
- **exact text**: of those, the OCR's text equal to the label up to case and runs of spaces (what
  a word-level tokenizer sees).

Elements that draw no text (sliders, icon buttons known by their description) cannot be read by an
OCR and are counted apart (``textless``).

The acting cost per step, screen against tree, is ``bench/ocr_acting.py``. Load is recorded before
and after (``machine()``).

Run: ``nice -n 5 python -m bench.ocr_screens [--screens 1000] [--out NAME]``; writes
``bench/results/ocr_screens.json``.
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
from simulators.simdroid.device import SimDroid, SimDroidConfig
from simulators.simdroid.expert import expert_action
from simulators.simdroid.tasks import load_tasks

NOISE = 0.3
SIMILARITY = 0.8


def readable_truth(
    elements: tuple[UIElement, ...], drawn: dict[tuple[int, int, int, int], str] | None = None
) -> tuple[list[tuple[UIElement, str]], int]:
    """(element, the text SimDroid draws for it) of the elements that draw text, and how many do not.

    ``drawn``: what an unfocused text field shows, by its bounds, where that is not its dump text:
    SimDroid's browser bar shows the page's address (``shopmart.com/cart``) and a shop's search
    field its hint while the dump holds the text last typed into them."""
    readable, textless = [], 0
    for element in elements:
        shown = (drawn or {}).get(element.bounds) if element.editable and not element.focused else None
        if element.class_name.endswith("SeekBar"):
            textless += 1  # a slider draws a track, not its percentage
        elif shown:
            readable.append((element, shown))
        elif element.text:
            readable.append((element, element.text))
        elif element.editable and element.content_desc:
            readable.append((element, element.content_desc))  # an empty field shows its hint
        else:
            textless += 1  # an icon known by its description only
    return readable, textless


def drawn_fields(device: SimDroid) -> dict[tuple[int, int, int, int], str]:
    """What each unfocused text field of the device's screen shows (``render._draw_field``)."""
    return {w.bounds: w.text or w.content_desc for w in device.screen().widgets if w.field is not None}


def _similarity(read: str, truth: str) -> int | None:
    """How well an OCR text reads a truth text: 0 equal (``text_key``), 1 similar, 2 the start of a
    label the screen cut short ("Apex Tent Pro 2-pe~"), None not at all."""
    import difflib

    a, b = text_key(read), text_key(truth)
    if not a or not b:
        return None
    if a == b:
        return 0
    if difflib.SequenceMatcher(None, a, b).ratio() >= SIMILARITY:
        return 1
    return 2 if len(a) >= 4 and b.startswith(a[:-1]) else None


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
    """One OCR element per truth element at most: the best reading first (equal, then similar, then
    a cut-short start), the nearest among equals."""
    pairs = []
    for t, (element, text) in enumerate(truth):
        cx, cy = element.center
        for r, candidate in enumerate(read):
            tier = _similarity(candidate.text, text)
            if tier is not None:
                rx, ry = candidate.center
                pairs.append((tier, (rx - cx) ** 2 + (ry - cy) ** 2, t, r))
    matches = [Match(element, text, None) for element, text in truth]
    used_t: set[int] = set()
    used_r: set[int] = set()
    for _, _, t, r in sorted(pairs):
        if t not in used_t and r not in used_r:
            matches[t].read = read[r]
            used_t.add(t)
            used_r.add(r)
    return matches


Screen = tuple[list[tuple[UIElement, str]], int, bytes, tuple[int, int]]


def screens(count: int, seed: int) -> list[Screen]:
    """``count`` screens the noisy expert visits: (truth elements with the text each draws, textless
    elements, the readable screenshot, the screen size)."""
    device = SimDroidConfig(distractor_prob=0.1, seed=seed).readable()
    env = SimDroidEnv(SimDroidEnvConfig(device=device, screenshots=True, ui_xml=False, seed=seed))
    tasks = load_tasks(None, "train") + load_tasks(None, "test")
    random.Random(seed).shuffle(tasks)
    rng = random.Random(seed)
    out: list[Screen] = []
    episode = 0
    while len(out) < count:
        task = tasks[episode % len(tasks)]
        observation = env.reset(task, seed=seed * 100_000 + episode)
        episode += 1
        done = False
        while len(out) < count:
            assert observation.screenshot_png is not None
            truth, textless = readable_truth(observation.elements, drawn_fields(env.device))
            out.append((truth, textless, observation.screenshot_png, observation.screen_size))
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
    # No whole-screen cache: every screen split into bands afresh, each band read through the band
    # and crop caches as the shipped reader reads it (a cached band or crop reads as a fresh
    # reading of it does, tests/envs/test_ocr_cache.py).
    reader = OcrReader(OcrConfig(cache_screens=0))
    reader.read(screens(1, seed + 1)[0][2])  # load the models outside the measurement
    matches: list[Match] = []
    textless = extra = 0
    seconds: list[float] = []
    misses: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    for done, (truth, no_text, png, size) in enumerate(screens(count, seed), start=1):
        started = time.perf_counter()
        boxes, shot = reader.read(png)
        read = screen_elements(boxes, shot, size)
        seconds.append(time.perf_counter() - started)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screens", type=int, default=1000, help="screens read (0: skip part 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="ocr_screens", help="result name under bench/results/")
    args = parser.parse_args()
    document: dict[str, Any] = {"bench": "ocr_screens", "machine_before": machine(), "seed": args.seed}
    document["settings"] = {
        "ocr": vars(OcrConfig()),
        "device": "SimDroidConfig().readable()",
        "noise": NOISE,
        "part_1_cache_screens": 0,
        "part_1_cache_crops": OcrConfig().cache_crops,
        "part_1_cache_bands": OcrConfig().cache_bands,
    }
    started = time.perf_counter()
    if args.screens:

        def partial(summary: dict[str, Any]) -> None:
            write_result(args.out, {**document, "ocr": {**summary, "partial": True}})
            print(f"{summary['screens']} screens: recall {summary['recall']}", flush=True)

        document["ocr"] = ocr_accuracy(args.screens, args.seed, partial)
    document["seconds"] = round(time.perf_counter() - started, 1)
    document["machine_after"] = machine()
    path = write_result(args.out, document)
    summary = {k: document.get(k) for k in ("ocr",)}
    for part in summary.values():
        if part:
            part.pop("miss_examples", None)
    print(summary)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
