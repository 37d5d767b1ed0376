"""bench.free_phrasings: its phrasings file is checked line by line, its arithmetic per kind is
right, and the file never reaches training: the warm start's demonstrations, the vocabularies'
corpora and files, and every split are built here and hold none of its texts, and no code but the
bench and the parser's tests names the file. The development phrasings that typing candidates are
tuned on (bench/typing_candidates.py) are kept from training the same way, and share no text with
the held-back file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.free_phrasings import DATA, Phrasing, load_phrasings, parser_agreement, summarise
from bench.typing_candidates import DEV
from simulators.simdroid.free_task import make_task

ROOT = Path(__file__).resolve().parents[2]
# Development phrasings that open the apps a validation_unseen fit never opens (the app-scoped
# semantic feature was chosen on them), kept from training as the others are.
DEV_APPS = ROOT / "bench" / "data" / "free_phrasings_dev_apps.jsonl"
# The only code that may name the phrasings file (docs and results may).
READERS = {
    "bench/free_phrasings.py",
    "bench/semantic_routes.py",  # reads the development files; refuses the held-back one (its test)
    "bench/typing_candidates.py",
    "tests/bench/test_free_phrasings.py",
    "tests/bench/test_semantic_routes.py",
    "tests/bench/test_typing_candidates.py",
    "tests/envs/test_free_text.py",
}
_SKIP_DIRS = {
    ".git",
    ".venv",
    ".distrl",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    "results",
}


def _phrasings(path: Path = DATA) -> list[Phrasing]:
    return load_phrasings(path.read_text(encoding="utf-8").splitlines(), str(path))


def _mentions(texts: list[str], phrasings: list[Phrasing]) -> list[str]:
    """Phrasings that are one of ``texts`` (case and spacing aside)."""
    wanted = {" ".join(p.text.split()).casefold() for p in phrasings}
    return sorted(wanted & {" ".join(text.split()).casefold() for text in texts})


def test_the_file_holds_natural_phrasings_of_every_general_kind_and_some_web_shopping():
    phrasings = _phrasings()
    kinds = {p.kind for p in phrasings}
    assert 60 <= len(phrasings) <= 100
    assert {"open_app", "toggle_setting", "set_alarm", "web_search", "set_brightness"} <= kinds
    assert sum(p.family == "webshop" for p in phrasings) >= 5


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"text": "open maps"}', "line.jsonl:1: expected {\"text\": ..., \"kind\": ..., \"params\""),
        ("not json", "line.jsonl:1: expected"),
        ('{"text": "x", "kind": "open_app", "params": {"app": "Spotify"}}', "line.jsonl:1: open_app: SimDroid has no app"),
        ('{"text": "x", "kind": "fly", "params": {}}', "line.jsonl:1: unknown task kind 'fly'"),
        ('{"text": "x", "kind": "open_app", "params": {"app": "Maps", "package": "p"}}', "takes exactly the params ['app']"),
    ],
)  # fmt: skip
def test_a_line_that_is_no_phrasing_is_an_error_naming_it(line, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_phrasings([line], "line.jsonl")


def test_a_phrasing_twice_is_an_error():
    line = '{"text": "Open Maps", "kind": "open_app", "params": {"app": "Maps"}}'
    with pytest.raises(ValueError, match=re.escape("line.jsonl:2: 'open maps' is there twice")):
        load_phrasings([line, line.replace("Open Maps", "open maps")], "line.jsonl")


def test_success_per_kind_family_and_overall_weighs_each_phrasing_once():
    phrasings = [
        Phrasing("open maps please", "open_app", {"app": "Maps"}),
        Phrasing("show the gallery", "open_app", {"app": "Photos"}),
        Phrasing("alarm at 7", "set_alarm", {"hour": 7, "minute": 0}),
        Phrasing("go to shopmart.com", "shop_open_site", {"site": "shopmart.com"}),
    ]
    ids = [make_task(p.text, p.kind, p.params).task_id for p in phrasings]
    per_task = dict(zip(ids, [1.0, 1 / 3, 0.0, 2 / 3], strict=True))
    summary = summarise(phrasings, per_task, episodes_per_task=3)
    assert summary["overall"] == {"success": 0.5, "phrasings": 4, "episodes": 12}
    assert summary["per_kind"]["open_app"] == {"success": 0.6667, "phrasings": 2, "episodes": 6}
    assert summary["per_kind"]["set_alarm"]["success"] == 0.0
    assert summary["per_family"]["general"]["success"] == 0.4444
    assert summary["per_family"]["webshop"]["success"] == 0.6667
    assert [r["success"] for r in summary["per_phrasing"]] == [1.0, 1 / 3, 0.0, 2 / 3]


def test_parser_agreement_lists_what_it_misread():
    phrasings = [
        Phrasing("open maps please", "open_app", {"app": "Maps"}),
        Phrasing("open maps now", "open_app", {"app": "Photos"}),  # written wrong on purpose
    ]
    agreement = parser_agreement(phrasings)
    assert (agreement["agrees"], agreement["of"]) == (1, 2)
    assert agreement["misread"][0]["text"] == "open maps now" and "Maps" in agreement["misread"][0]["read"]


def test_the_development_phrasings_share_no_text_with_the_held_back_ones():
    for path in (DEV, DEV_APPS):
        shared = _mentions([p.text for p in _phrasings(path)], _phrasings())
        assert not shared, shared  # only the shared texts in the message, never the held-back file's


def test_the_unseen_app_phrasings_open_only_apps_a_validation_fit_never_opens():
    from simulators.simdroid.free_text import Parsed, parse_instruction
    from simulators.simdroid.tasks import unseen_split

    fit, validation = unseen_split("general")
    phrasings = _phrasings(DEV_APPS)
    apps = {p.params["app"] for p in phrasings}
    assert {p.kind for p in phrasings} == {"open_app"} and len(phrasings) >= 40
    assert apps == {t.params["app"] for t in validation if t.kind == "open_app"}
    assert not apps & {t.params["app"] for t in fit if t.kind == "open_app"}
    assert all(parse_instruction(p.text) == Parsed("open_app", p.params) for p in phrasings)


def test_no_phrasing_reaches_the_warm_start_the_vocabularies_or_any_split():
    from distrl_core.envs.protocol import FAMILIES
    from distrl_core.policy.tokenizer import split_words
    from distrl_core.policy.vocabulary import CORPUS_SPLITS, vocabulary_path
    from simulators.corpus import simdroid_corpus
    from simulators.simdroid.tasks import SPLIT_CHOICES, load_tasks
    from simulators.warm_start import TRAIN_SETS, WarmStartConfig, collect_demonstrations

    # Both files: the held-back phrasings, and the development ones typing candidates are tuned on.
    sets = {"held back": _phrasings(), "development": _phrasings(DEV) + _phrasings(DEV_APPS)}
    # Every split and selection, both families.
    instructions = [t.instruction for split in SPLIT_CHOICES for t in load_tasks(split=split)]
    # The warm start's demonstrations, both families, on train (every other set it may learn from
    # is carved from train's tasks) ...
    assert all(
        {t.task_id for t in load_tasks(split=s)} <= {t.task_id for t in load_tasks(split="train")}
        for s in TRAIN_SETS
    )
    rows = collect_demonstrations(WarmStartConfig(family=None, split="train")).rows
    assert {r["task_family"] for r in rows} == set(FAMILIES)
    demonstrated = sorted({r["instruction"] for r in rows})
    # ... and the text the tiny tokenizer's vocabularies are built from (train holds every fit set).
    corpus = [text for split in ("train", "test") for text in simdroid_corpus(split)]
    corpus_words = {w for t in corpus for w in split_words(t)}
    vocabularies = {s: set(vocabulary_path(s).read_text(encoding="utf-8").split()) for s in CORPUS_SPLITS}
    for name, phrasings in sets.items():
        for texts in (instructions, demonstrated, corpus):
            found = _mentions(texts, phrasings)
            assert not found, (name, found)
        # The vocabulary files lack the words only the phrasings hold ("louvre", "sourdough", ...).
        only_here = {w for p in phrasings for w in split_words(p.text)} - corpus_words
        assert len(only_here) >= 20, name
        for split, vocabulary in vocabularies.items():
            assert not only_here & vocabulary, (name, split)


def test_only_the_bench_and_the_parser_tests_name_the_file():
    code = [
        path
        for path in ROOT.rglob("*")
        if path.is_file()
        and not _SKIP_DIRS & set(path.relative_to(ROOT).parts)
        and (path.suffix in {".py", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".ini", ".txt"} or path.name == "Makefile")
    ]  # fmt: skip
    naming = re.compile(r"free_phrasings|bench/data|[\"']bench[\"']\s*/\s*[\"']data[\"']")
    found = {
        str(p.relative_to(ROOT))
        for p in code
        if naming.search(p.read_text(encoding="utf-8", errors="replace"))
    }
    assert found == READERS
