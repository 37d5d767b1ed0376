"""How many validation phrasings hold a word the tiny model's vocabulary lacks, per split.

The tiny default's word vocabulary is built from task texts (instructions, the screens the expert
sees, candidate texts). A choice between bases is only informative about unknown words if the
validation split has some: this counts, per (validation split, vocabulary), the validation tasks
whose instruction holds at least one word outside the vocabulary, and lists those words.

    python -m bench.validation_words [--out bench/results/validation_words.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from distrl_core.policy.prompt import PROMPT_WORDS
from distrl_core.policy.tokenizer import split_words
from simulators.corpus import simdroid_corpus
from simulators.simdroid.tasks import load_tasks, validation_split, word_holdout_templates


def vocabulary(corpus: str) -> set[str]:
    """The words the tiny tokenizer built from ``corpus`` knows (as build_word_tokenizer adds them)."""
    words = {w for text in simdroid_corpus(corpus) for w in split_words(text)}
    return words | {str(n) for n in range(101)} | set(PROMPT_WORDS)


def count(tasks, known: set[str]) -> dict:
    with_unknown = [t for t in tasks if any(w not in known for w in split_words(t.instruction))]
    return {
        "tasks": len(tasks),
        "with_unknown_word": len(with_unknown),
        "share": round(len(with_unknown) / len(tasks), 3),
        "unknown_words": sorted({w for t in tasks for w in split_words(t.instruction) if w not in known}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="bench/results/validation_words.json")
    args = parser.parse_args()
    cases = {
        "validation (*-train-0) / vocabulary of the train split (as run today)": (
            "train",
            validation_split()[1],
        ),
        "validation (*-train-0) / vocabulary of its fit tasks": ("fit", validation_split()[1]),
        "validation_words / vocabulary of its fit tasks (PolicyConfig.vocabulary='fit_words')": (
            "fit_words",
            validation_split(words=True)[1],
        ),
        "test / vocabulary of the train split": ("train", load_tasks(split="test")),
    }
    vocabularies: dict[str, set[str]] = {}
    results = {}
    for name, (corpus, tasks) in cases.items():
        known = vocabularies.setdefault(corpus, vocabulary(corpus))
        results[name] = count(tasks, known)
        print(f"{name}: {results[name]['with_unknown_word']}/{results[name]['tasks']} tasks", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"held_out_templates": list(word_holdout_templates()), "results": results}, indent=2)
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
