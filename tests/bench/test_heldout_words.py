"""bench.heldout_words splits per-task success by whether the instruction holds a word the training
vocabulary lacks, and by phrasing template."""

from __future__ import annotations

from bench.heldout_words import split_by_words, summarise
from distrl_core.policy.tokenizer import split_words
from simulators.simdroid.tasks import load_tasks


def _test_tasks():
    return load_tasks("general", "test")


def test_tasks_are_split_by_unseen_words_and_templates():
    tasks = _test_tasks()
    running = [t for t in tasks if t.instruction.startswith("Can you get")]
    # A vocabulary of every word but those of one template: exactly that template counts as unseen.
    known = {w for t in tasks for w in split_words(t.instruction)} - {"running", "get"}
    per_task = {t.task_id: (0.0 if t in running else 1.0) for t in tasks}
    split = split_by_words(per_task, known)
    assert split["tasks_unseen_word"] == len(running) > 0
    assert split["unseen_word"] == 0.0 and split["no_unseen_word"] == 1.0
    template = running[0].params["template"]
    assert split["templates"][template] == 0.0
    assert split["template_examples"][template].startswith("Can you get")
    assert all(v == 1.0 for k, v in split["templates"].items() if k != template)


def test_the_gap_over_seeds_is_paired_per_seed():
    tasks = _test_tasks()
    known = {w for t in tasks for w in split_words(t.instruction)} - {"running"}
    runs = []
    for unseen_success in (0.2, 0.4, 0.6):
        per_task = {t.task_id: (unseen_success if "running" in t.instruction else 0.9) for t in tasks}
        split = split_by_words(per_task, known)
        runs.append({"warm_start": split, "final": split})
    gap = summarise(runs)["final"]["gap"]
    assert gap["n"] == 3 and abs(gap["mean"] - 0.5) < 1e-9
    assert gap["ci95"][0] < 0.5 < gap["ci95"][1]
