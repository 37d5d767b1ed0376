"""Task families: sizes, horizons, held-out splits (parameters and phrasings), determinism."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from simulators.simdroid import SimDroid, Task, get_task, load_tasks
from simulators.simdroid import tasks as tasks_module

# The parameters that make two tasks "the same problem" for each kind.
PARAM_KEYS = {
    "open_app": ("package",),
    "toggle_setting": ("setting", "on"),
    "set_alarm": ("hour", "minute"),
    "web_search": ("query",),
    "set_brightness": ("percent",),
    "shop_open_site": ("site",),
    "shop_search": ("site", "query"),
    "shop_add_to_cart": ("site", "query"),
}


def _key(task) -> tuple:
    return (task.kind, *(task.params[k] for k in PARAM_KEYS[task.kind]))


@pytest.mark.parametrize("family", ["general", "webshop"])
def test_each_family_has_enough_train_tasks_and_a_test_split(family: str) -> None:
    train, test = load_tasks(family, "train"), load_tasks(family, "test")
    assert len(train) >= 100
    assert len(test) >= 40
    assert {t.horizon for t in train + test} == {10 if family == "general" else 20}
    kinds = {t.kind for t in train}
    assert kinds == {t.kind for t in test}
    if family == "webshop":
        assert {t.params["level"] for t in train} == {1, 2, 3}
    else:
        assert kinds == {"open_app", "toggle_setting", "set_alarm", "web_search", "set_brightness"}


def test_test_split_holds_out_phrasings_and_parameters() -> None:
    train, test = load_tasks(split="train"), load_tasks(split="test")
    assert not {t.instruction for t in train} & {t.instruction for t in test}
    assert not {t.params["template"] for t in train} & {t.params["template"] for t in test}
    train_keys = {_key(t) for t in train}
    repeated = [t.task_id for t in test if _key(t) in train_keys]
    assert repeated == []


def test_ids_are_unique_and_lookup_works() -> None:
    everything = load_tasks()
    assert len({t.task_id for t in everything}) == len(everything)
    some = everything[17]
    assert get_task(some.task_id) is some
    with pytest.raises(KeyError, match="general-train-0003"):
        get_task("nope")
    with pytest.raises(ValueError, match="family"):
        load_tasks("shopping")
    with pytest.raises(ValueError, match="split"):
        load_tasks(split="heldout")  # "validation" is a selection carved from train


def test_params_are_read_only_json_able_and_tasks_pickle() -> None:
    task = load_tasks("webshop", "train")[-1]
    with pytest.raises(TypeError):
        task.params["site"] = "x"  # type: ignore[index]
    json.dumps(dict(task.params))
    copy = pickle.loads(pickle.dumps(task))
    assert copy == task and hash(copy) == hash(task)
    with pytest.raises(TypeError):
        copy.params["site"] = "x"  # type: ignore[index]


def test_task_fields_are_validated() -> None:
    with pytest.raises(ValueError, match="family"):
        Task("x", "games", "open_app", "Open Clock", "train", 10, {})
    with pytest.raises(ValueError, match="horizon"):
        Task("x", "general", "open_app", "Open Clock", "train", 0, {})


def test_no_task_is_already_solved_at_its_start_state() -> None:
    device = SimDroid()
    solved = []
    for task in load_tasks():
        device.load_task(task)
        if device.is_successful(task):
            solved.append(task.task_id)
    assert solved == []


def _fingerprint() -> list[tuple]:
    return [(t.task_id, t.instruction, json.dumps(dict(t.params), sort_keys=True)) for t in load_tasks()]


def test_generation_is_deterministic_within_and_across_processes() -> None:
    first = _fingerprint()
    tasks_module._all_tasks.cache_clear()
    tasks_module._index.cache_clear()
    assert _fingerprint() == first
    # another interpreter with a different string-hash salt must build the very same tasks
    code = (
        "import json;from simulators.simdroid import load_tasks;"
        "print(json.dumps([[t.task_id,t.instruction,json.dumps(dict(t.params),sort_keys=True)] for t in load_tasks()]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert [tuple(row) for row in json.loads(out.stdout)] == first
