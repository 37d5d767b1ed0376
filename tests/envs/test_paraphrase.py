"""Instruction augmentation (simulators/simdroid/paraphrase.py): deterministic draws, every phrasing
read back by the free-text parser as the task's own kind and parameters, and the setting reaching
the training paths only (warm start, collectors, the local loop, the benches and CLI)."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from simulators.simdroid.free_task import KINDS
from simulators.simdroid.free_text import Parsed, parse_instruction
from simulators.simdroid.paraphrase import paraphrase, paraphrase_task, paraphrase_tasks
from simulators.simdroid.tasks import _template_fields, load_tasks, train_templates
from simulators.warm_start import WarmStartConfig, collect_demonstrations

DRAWS = 500


def _by_kind() -> dict[str, list]:
    tasks = defaultdict(list)
    for task in load_tasks(None, "train"):
        tasks[task.kind].append(task)
    return tasks


def test_same_rng_same_phrasings() -> None:
    tasks = load_tasks(None, "train")[:40]
    first = [paraphrase(t, random.Random(7)) for t in tasks]
    assert first == [paraphrase(t, random.Random(7)) for t in tasks]
    rng_a, rng_b = random.Random(3), random.Random(3)
    assert [paraphrase(t, rng_a) for t in tasks] == [paraphrase(t, rng_b) for t in tasks]
    assert first != [paraphrase(t, random.Random(8)) for t in tasks]


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_draw_reads_back_as_the_task(kind: str) -> None:
    tasks = _by_kind()[kind]
    rng = random.Random(kind)
    texts = set()
    for i in range(DRAWS):
        task = tasks[i % len(tasks)]
        text = paraphrase(task, rng)
        assert text is not None, f"no paraphrase of {task.instruction!r} read back"
        parsed = parse_instruction(text)
        assert isinstance(parsed, Parsed) and parsed.kind == kind, (text, parsed)
        named = {name: task.params[name] for name in KINDS[kind]}
        assert parsed.params == named, (text, parsed.params, named)
        texts.add(text)
    assert len(texts) > DRAWS * 0.8  # varied, not a handful of phrasings


def test_paraphrased_task_keeps_id_split_and_params() -> None:
    task = load_tasks("general", "train")[0]
    other = paraphrase_task(task, random.Random(0))
    assert other.instruction != task.instruction
    assert (other.task_id, other.split, other.kind, dict(other.params)) == (
        task.task_id, task.split, task.kind, dict(task.params),
    )  # fmt: skip


def test_probability_zero_draws_nothing_and_bounds_are_checked() -> None:
    tasks = load_tasks("general", "train")[:10]
    rng = random.Random(0)
    state = rng.getstate()
    assert paraphrase_tasks(tasks, 0.0, rng) == tasks and rng.getstate() == state
    with pytest.raises(ValueError, match="probability"):
        paraphrase_tasks(tasks, 1.5, rng)
    for bad in (-0.1, 1.01):
        with pytest.raises(ValueError, match=r"WarmStartConfig\.paraphrase is the probability"):
            WarmStartConfig(paraphrase=bad)
    from simulators.local_loop import LoopConfig

    with pytest.raises(ValueError, match=r"LoopConfig\.paraphrase"):
        LoopConfig(paraphrase=2.0)


def test_warm_start_with_paraphrase_demonstrates_new_texts_on_train_tasks_only() -> None:
    tasks = load_tasks("general", "fit_unseen")[::10]
    rows = collect_demonstrations(WarmStartConfig(noise=0.0, paraphrase=1.0), tasks=tasks).rows
    by_id = {t.task_id: t for t in tasks}
    own = {t.task_id: t.instruction for t in tasks}
    shown = {row["task_id"]: row["instruction"] for row in rows}
    assert shown.keys() == own.keys()
    every_train_text = {t.instruction.casefold() for t in load_tasks("general", "train")}
    for task_id, text in shown.items():
        task = by_id[task_id]
        rendered = {tmpl.format(**_template_fields(task)).casefold() for tid, tmpl in train_templates()
                    if tid.split("-")[0] == task.params["template"].split("-")[0]}  # fmt: skip
        assert text != own[task_id] and text.casefold() not in rendered | every_train_text
    assert sum(row["episode_success"] for row in rows if row["done"]) == len(tasks)  # the rules still judge
    # evaluation tasks are never touched: loading them again gives the templates' texts
    held = {t.instruction for t in load_tasks("general", "validation_unseen")}
    assert not held & set(shown.values())
    plain = collect_demonstrations(WarmStartConfig(noise=0.0), tasks=tasks).rows
    assert {row["instruction"] for row in plain} == set(own.values())


def test_settings_carry_paraphrase_to_training_only() -> None:
    from pydantic import ValidationError

    from bench._curve_settings import CurveSettings
    from flows.train_local import _collector_params, warm_start_config
    from flows.train_local_params import TrainLocalParams
    from tasks.collector import CollectorParams

    params = TrainLocalParams(paraphrase=0.5)
    assert warm_start_config(params).paraphrase == 0.5
    assert _collector_params(params, 0).paraphrase == 0.5
    with pytest.raises(ValidationError):
        TrainLocalParams(paraphrase=1.5)
    with pytest.raises(ValidationError, match="held"):
        CollectorParams(split="test", paraphrase=0.5)
    assert CollectorParams(split="fit_unseen", paraphrase=0.5).paraphrase == 0.5
    with pytest.raises(ValueError, match="probability"):
        CurveSettings(env_steps=1, paraphrase=-1.0)


def test_cli_and_bench_accept_paraphrase() -> None:
    import argparse

    from bench._curve_settings import add_curve_arguments, curve_settings
    from ops.cli_flows import _demo_options, _train_local_options

    parser = argparse.ArgumentParser()
    add_curve_arguments(parser)
    assert curve_settings(parser.parse_args(["--paraphrase", "0.5"])).paraphrase == 0.5
    for add in (_demo_options, _train_local_options):
        command = argparse.ArgumentParser()
        add(command)
        assert command.parse_args(["--paraphrase", "0.25"]).paraphrase == 0.25
    from ops.cli import _parse

    demo, train_local = _parse(["demo"]), _parse(["train-local"])
    assert demo.options.build(demo).paraphrase == 0.8  # `distrl demo` rephrases by default
    assert train_local.options.build(train_local).paraphrase == 0.0  # the flows keep the templates


def test_demo_and_train_local_take_a_family_with_the_demo_defaults() -> None:
    from ops.cli import _parse
    from ops.cli_flows import demo_params

    for family, base in (("general", "tiny-minilm-words-values"), ("webshop", "tiny-minilm")):
        params = demo_params(_parse(["demo", "--family", family]))
        assert (params.family, params.base, params.paraphrase) == (family, base, 0.8)
        given = _parse(["demo", "--family", family, "--paraphrase", "0.3", "--base", "tiny"])
        params = demo_params(given)
        assert (params.family, params.paraphrase, params.base) == (family, 0.3, "tiny")
        train_local = _parse(["train-local", "--family", family])
        assert train_local.options.build(train_local).family == family
    demo = _parse(["demo"])
    assert demo.options.build(demo).family == "general"
    with pytest.raises(SystemExit):
        _parse(["demo", "--family", "shopping"])


def test_numbers_spelled_for_phrasings_read_back_as_their_digits() -> None:
    from distrl_core.envs.number_words import digits, spelled

    assert [spelled(n) for n in (0, 7, 13, 40, 45, 100)] == [
        "zero", "seven", "thirteen", "forty", "forty-five", "one hundred",
    ]  # fmt: skip
    assert all(digits(spelled(n)) == str(n) for n in range(101))
    with pytest.raises(ValueError, match="0 to 100"):
        spelled(101)


def test_apps_and_switches_are_also_called_by_the_parsers_other_words_for_them() -> None:
    """A share of app phrasings name the app by what it holds ("my inbox" for Gmail) and switch
    phrasings use the parser's other names ("flight mode"), each still read back as the task."""
    from simulators.simdroid.free_text import APP_WORDS, SETTING_WORDS

    tasks = _by_kind()
    rng = random.Random(11)
    apps = [paraphrase(t, rng) or "" for t in tasks["open_app"][:300]]
    by_alias = [
        text for text, task in zip(apps, tasks["open_app"], strict=False)
        if task.params["app"].lower() not in text.lower()
        and any(w in text.lower() for w in APP_WORDS[task.params["app"]])
    ]  # fmt: skip
    assert 0.15 * len(apps) < len(by_alias) < 0.5 * len(apps), by_alias[:5]
    switches = [(paraphrase(t, rng) or "").lower() for t in tasks["toggle_setting"][:300]]
    other_words = {w for words in SETTING_WORDS.values() for w in words if w not in ("wifi", "dnd")}
    assert any(w in text.split(" ", 1)[-1] for text in switches for w in other_words if len(w) > 3)
