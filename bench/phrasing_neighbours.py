"""Which train instruction a pretrained encoder puts nearest each test instruction, and whether it
is of the same task kind: a probe of the frozen geometry the encoder policy starts from.

The encoder policy trains only its top layer and heads on the train phrasings; what it does with a
test phrasing follows, in part, from which train phrasings the frozen encoder already holds close.
Here each instruction is embedded as the packaged all-MiniLM-L6-v2 is meant to be used as a sentence
encoder (mean of the last layer over real tokens, L2-normalised), and each test instruction is
matched to its nearest train instruction by cosine similarity. Per test phrasing template: the share
of its tasks whose nearest train instruction has the same kind, the kinds found, and one example.
No training, no test scores: only which neighbours the pretrained geometry offers.

    python -m bench.phrasing_neighbours [--base minilm] [--family general] [--heldout test]
        [--out bench/results/phrasing_neighbours.json]

``--heldout`` names the held-out set and so the set it is matched against: test against train,
a validation selection against the fit tasks trained beside it (validation: fit, validation_words:
fit_words). A validation split that predicts test for this base should offer about as many
wrong-kind neighbours as test does.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch

from distrl_core.policy.pretrained import resolve_base
from simulators.simdroid.tasks import TRAINED_BESIDE, load_tasks


def mean_pooled(vectors: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T, H] token vectors, [B, T] 1/0 mask -> [B, H] unit-length means over the real tokens."""
    weights = mask.unsqueeze(-1).to(vectors.dtype)  # [B, T, 1]
    summed = (vectors * weights).sum(dim=1)  # [B, H]
    counts = weights.sum(dim=1).clamp(min=1.0)  # [B, 1]
    return torch.nn.functional.normalize(summed / counts, dim=-1)


def nearest(queries: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[Q, H] and [K, H] unit vectors -> ([Q] index of each query's most similar key, [Q] cosine)."""
    similarity = queries @ keys.T  # [Q, K]
    best, index = similarity.max(dim=1)
    return index, best


@torch.no_grad()
def embed(base: str, texts: list[str], batch: int = 32) -> torch.Tensor:
    """[N, H] sentence vectors of ``texts`` under the encoder at ``base`` (a local folder)."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModel.from_pretrained(base).eval()
    out = []
    for start in range(0, len(texts), batch):
        encoded = tokenizer(texts[start : start + batch], padding=True, truncation=True, return_tensors="pt")
        hidden = model(**encoded).last_hidden_state  # [B, T, H]
        out.append(mean_pooled(hidden, encoded["attention_mask"]))
    return torch.cat(out)


def neighbours(train, test, train_vectors: torch.Tensor, test_vectors: torch.Tensor) -> dict[str, Any]:
    """Per test template: same-kind share of nearest train instructions, the kinds, an example."""
    index, cosine = nearest(test_vectors, train_vectors)
    rows: dict[str, list[tuple[Any, Any, float]]] = defaultdict(list)
    for task, i, c in zip(test, index.tolist(), cosine.tolist(), strict=True):
        rows[str(task.params.get("template", task.kind))].append((task, train[i], c))
    templates = {}
    for template, matches in sorted(rows.items()):
        task, neighbour, similarity = matches[0]
        templates[template] = {
            "kind": task.kind,
            "tasks": len(matches),
            "same_kind_share": sum(n.kind == t.kind for t, n, _ in matches) / len(matches),
            "neighbour_kinds": dict(Counter(n.kind for _, n, _ in matches).most_common()),
            "mean_cosine": sum(c for *_, c in matches) / len(matches),
            "example": {
                "test": task.instruction,
                "nearest_train": neighbour.instruction,
                "cosine": similarity,
            },
        }
    same = sum(
        n.kind == t.kind for t, n in ((t, train[i]) for t, i in zip(test, index.tolist(), strict=True))
    )
    return {
        "same_kind_share": same / len(test),
        "mean_cosine": float(cosine.mean()),  # how far the held-out phrasings sit from training
        "tasks": len(test),
        "templates": templates,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--base", default="minilm", help="an encoder base: 'minilm' (packaged) or a local folder"
    )
    parser.add_argument("--family", default="general", choices=["general", "webshop"])
    parser.add_argument("--heldout", default="test", choices=sorted(TRAINED_BESIDE))
    parser.add_argument("--out", default="bench/results/phrasing_neighbours.json")
    args = parser.parse_args(argv)
    base = resolve_base(args.base)
    beside = TRAINED_BESIDE[args.heldout]
    train, test = load_tasks(args.family, beside), load_tasks(args.family, args.heldout)
    vectors = embed(base, [t.instruction for t in train + test])
    result = {
        "benchmark": "phrasing_neighbours",
        "command": (
            f"python -m bench.phrasing_neighbours --base {args.base} --family {args.family} "
            f"--heldout {args.heldout}"
        ),
        "base": args.base,
        "heldout": args.heldout,
        "matched_against": beside,
        "pooling": "mean of the last layer over real tokens, L2-normalised; cosine similarity",
        **neighbours(train, test, vectors[: len(train)], vectors[len(train) :]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for template, row in result["templates"].items():
        print(
            f"{template:18s} same kind {row['same_kind_share']:.2f}  {row['neighbour_kinds']}  "
            f"{row['example']['test']!r} -> {row['example']['nearest_train']!r}"
        )
    print(
        f"nearest {beside} instruction of the same kind: {result['same_kind_share']:.3f} "
        f"of {result['tasks']} {args.heldout} tasks; mean cosine to it {result['mean_cosine']:.3f}"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
