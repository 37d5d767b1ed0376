"""Where the semantic feature points, before any training: for each development phrasing, whether the
route the frozen encoder ranks first is the one SimDroid's expert takes.

A base with a scoped feature (``SubwordSettings.semantic_labels``, ``semantic_paths``,
``semantic_value_paths``) compares the instruction with the last label of each of its paths and
marks the most similar one on every screen of it (``semantic_match.scoped_indices``). That ranking
is fixed by the encoder and the scope alone, so it can be read without a demo: per phrasing, the
paths' similarities (``semantic_match.path_similarities``, what an encoded step reads) and the
expert's route for the phrasing's task (``simulators.corpus.expert_route``: the labels it taps from
the launcher, then the control it types into or sets). The top path is *right* when it is the
deepest path of the scope that the expert's route starts with: the app for an app phrasing, "Chrome
> Search or type web address" for a search, "Settings > Network & internet > Wi-Fi" for a Wi-Fi
switch, the Display page (or, where the base has it, the brightness slider) for brightness. It
says what the policy is told, not what it does; the demos' development phrasings say that.

Only the development files are read: the held-back phrasings are scored once, at the end, by
``bench.free_phrasings``.

    python -m bench.semantic_routes [--bases tiny-minilm-controls tiny-minilm-words-values]
        [--data bench/data/free_phrasings_dev.jsonl bench/data/free_phrasings_dev_apps.jsonl]
        [--out bench/results/semantic_routes.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench._common import machine, write_result
from bench.free_phrasings import DATA, Phrasing, load_phrasings

DEV_FILES = [
    str(DATA.with_name("free_phrasings_dev.jsonl")),
    str(DATA.with_name("free_phrasings_dev_apps.jsonl")),
]


def right_path(scope: list[tuple[str, ...]], route: list[str]) -> tuple[str, ...] | None:
    """The deepest path of ``scope`` that ``route`` (the expert's labels) starts with, case aside."""
    folded = [label.casefold() for label in route]
    starts = [p for p in scope if [label.casefold() for label in p] == folded[: len(p)]]
    return max(starts, key=len) if starts else None


def _expert_routes(phrasings: list[Phrasing]) -> list[list[str]]:
    from simulators.corpus import expert_route, route_through
    from simulators.sim_env import SimDroidEnv, SimDroidEnvConfig
    from simulators.simdroid.device import SimDroidConfig

    env = SimDroidEnv(SimDroidEnvConfig(device=SimDroidConfig(distractor_prob=0.0), screenshots=False))
    routes = []
    for phrasing in phrasings:
        routes.append(route_through(*expert_route(env, phrasing.kind, phrasing.params)))
    return routes


def score_base(base: str, phrasings: list[Phrasing], routes: list[list[str]]) -> dict:
    from distrl_core.policy.config import policy_config_for
    from distrl_core.policy.semantic_match import path_similarities

    subwords = policy_config_for(base, 0).subwords
    if subwords is None or not subwords.semantic_labels:
        raise SystemExit(
            f"base {base!r} has no scoped semantic feature: pick one with routes (e.g. tiny-minilm-controls)"
        )
    scope, values = list(subwords.semantic_scope()), subwords.semantic_values()
    kinds: dict[str, dict[str, int]] = {}
    rows = []
    for phrasing, route in zip(phrasings, routes, strict=True):
        similarities = path_similarities(subwords.source, phrasing.text, scope, values)
        top = scope[int(similarities.argmax())]
        want = right_path(scope, route)
        right = want is not None and top == want
        tally = kinds.setdefault(phrasing.kind, {"right": 0, "phrasings": 0})
        tally["right"] += right
        tally["phrasings"] += 1
        rows.append({"text": phrasing.text, "kind": phrasing.kind, "top": " > ".join(top), "right": right})
    total = sum(t["right"] for t in kinds.values())
    return {
        "right": total,
        "phrasings": len(phrasings),
        "share": total / len(phrasings),
        "per_kind": kinds,
        "per_phrasing": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bases", nargs="+", default=["tiny-minilm-controls", "tiny-minilm-words-values"])
    parser.add_argument("--data", nargs="+", default=DEV_FILES)
    parser.add_argument("--out", default="semantic_routes")
    args = parser.parse_args(argv)
    if any(Path(path).resolve() == DATA.resolve() for path in args.data):
        parser.error(
            f"{DATA} holds the held-back phrasings, scored once at the end by bench.free_phrasings: "
            "read the development files here (the default)"
        )
    phrasings = [p for path in args.data for p in load_phrasings(Path(path).read_text().splitlines(), path)]
    routes = _expert_routes(phrasings)
    document = {
        "bench": "semantic_routes",
        "data": args.data,
        "machine": machine(),
        "bases": {base: score_base(base, phrasings, routes) for base in args.bases},
    }
    path = write_result(args.out, document)
    for base, result in document["bases"].items():
        kinds = ", ".join(f"{k} {v['right']}/{v['phrasings']}" for k, v in result["per_kind"].items())
        print(f"{base}: {result['right']}/{result['phrasings']} right ({kinds})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
