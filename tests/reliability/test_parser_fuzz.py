"""The action parsers under hostile model output: time grows linearly with length, nothing raises.

Timing is compared as a ratio (8x the input must cost well under 30x the time; linear is ~8x,
quadratic 64x, the old backtracking regex over 1,000x), never against a wall-clock budget, so a
loaded machine slows both sides alike. The base lengths are small so that a regression fails in
seconds instead of hanging.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from distrl_core.envs.actions import Action, parse_action
from distrl_core.envs.actions_autoui import parse_autoui_action

GROWTH = 8
MAX_RATIO = 30.0

# The probe's inputs, as functions of a length parameter n.
WORST_CASES: dict[str, Callable[[int], str]] = {
    "open_point_then_spaces": lambda n: '"action_type": "DUAL_POINT", "touch_point": "[' + " " * n,
    "repeated_open_points": lambda n: '"touch_point": "[' * (n // 16),
    "repeated_keys_no_colon": lambda n: '"typed_text" ' * (n // 13),
    "decision_then_spaces": lambda n: "Action Decision" + " " * n,
    "type_with_many_quotes": lambda n: '"action_type": "TYPE", "typed_text": "' + '", ' * (n // 3),
    "point_many_commas": lambda n: '"action_type":"DUAL_POINT","touch_point":"[' + "0," * (n // 2),
    "canonical_unclosed_call": lambda n: "type(" + '"\\' * (n // 2),
}


def _seconds(parse: Callable[[str], Action], text: str) -> float:
    """Best of several timed batches, each long enough to rise above timer noise."""
    repeats = 1
    while True:
        started = time.perf_counter()
        for _ in range(repeats):
            parse(text)
        elapsed = time.perf_counter() - started
        if elapsed >= 0.005 or repeats >= 4096:
            break
        repeats *= 4
    best = elapsed
    for _ in range(4):
        started = time.perf_counter()
        for _ in range(repeats):
            parse(text)
        best = min(best, time.perf_counter() - started)
    return best / repeats


@pytest.mark.parametrize("parse", [parse_autoui_action, parse_action], ids=["autoui", "canonical"])
@pytest.mark.parametrize("name", list(WORST_CASES))
def test_worst_case_time_grows_linearly_with_length(parse: Callable[[str], Action], name: str) -> None:
    make = WORST_CASES[name]
    # Ascending, failing at the first bad step: a catastrophic parser fails at 250 -> 2,000
    # characters (seconds) before the 2,000 -> 16,000 step (which shows a merely quadratic one).
    for base in (250, 2000):
        small, large = make(base), make(base * GROWTH)
        ratio = _seconds(parse, large) / _seconds(parse, small)
        assert ratio < MAX_RATIO, f"{name}: {GROWTH}x of {base} chars took {ratio:.0f}x the time (not linear)"


_FRAGMENTS = [
    "Action Decision:", "Action Plan:", '"action_type"', "action_type", ": ", ":", '"DUAL_POINT"', '"TYPE"',
    '"PRESS_BACK"', '"STATUS_TASK_COMPLETE"', '"touch_point"', '"lift_point"', '"typed_text"', '"[0.5, 0.5]"',
    '"[0.14, 0.1]"', "[", "]", ",", '"', "-1.0", "nan", "1e309", "0.04", " ", "\\", "\n", "{", "}", "\ud83d",
    "\ude00", "\U0001f600", "type(", "tap(", "swipe(", ")", "\\u", "\\ud83d", "\x00", "é", "x" * 300,
]  # fmt: skip


def _random_inputs(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "".join(chr(c) for c in range(32, 127)) + "\n\t\x00\ud800\udfff€中"
    inputs = []
    for i in range(count):
        if i % 3 == 0:
            inputs.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120))))
        else:
            inputs.append("".join(rng.choice(_FRAGMENTS) for _ in range(rng.randrange(0, 24))))
    return inputs


@pytest.mark.parametrize("parse", [parse_autoui_action, parse_action], ids=["autoui", "canonical"])
def test_bounded_random_fuzz_never_raises_and_every_action_can_be_stored(
    parse: Callable[[str], Action],
) -> None:
    failures = []
    for text in _random_inputs(6000, seed=12):
        action = parse(text)
        reason = action.reason or ""
        if not isinstance(action, Action) or "internal parser error" in reason:
            failures.append((text, reason))
            continue
        # What the step row records (the action's canonical text) must have a UTF-8 form.
        try:
            str(action).encode("utf-8")
        except UnicodeEncodeError as error:
            failures.append((text, f"unstorable: {error}"))
    assert failures == [], f"{len(failures)} bad results, first: {failures[:3]!r}"
