"""Success on instructions written the way people type them, apart from the generator's templates.

`bench/data/free_phrasings.jsonl` holds natural phrasings (one JSON object a line: ``text``, the
task ``kind`` and the ``params`` a person names, as ``simulators.simdroid.free_task.KINDS`` lists
them), written without the generator's templates. Nothing that trains reads the file: the warm
start, the vocabularies and every split come from ``load_tasks`` (tests/bench/test_free_phrasings.py
proves it). Each phrasing becomes a task on the fly (``make_task``, from the parameters the file
gives, so a parser slip cannot change what the policy is scored on), is played greedily
``--episodes`` times under the held-out evaluation's fixed seeds, and the rules judge each episode.
Whether the parser (``free_text.parse_instruction``, what `distrl run` uses) reads every phrasing
as written is reported beside it. With ``--compare`` (the default), the generated test split of the
same families is scored the same way, so the two figures differ only in phrasing.

    python -m bench.free_phrasings --home .distrl/demo [--policy champion | --version N]
    python -m bench.free_phrasings --policy-dir DIR        # a saved policy version's folder
        [--family general] [--episodes 3] [--label NAME] [--out bench/results/free_phrasings_NAME.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from simulators.simdroid.free_task import KINDS, make_task
from simulators.simdroid.free_text import Parsed, parse_instruction

DATA = Path(__file__).parent / "data" / "free_phrasings.jsonl"


@dataclass(frozen=True)
class Phrasing:
    text: str
    kind: str
    params: dict[str, Any]

    @property
    def family(self) -> str:
        return "webshop" if self.kind.startswith("shop_") else "general"


def load_phrasings(lines: Iterable[str], source: str = str(DATA)) -> list[Phrasing]:
    """The phrasings of a JSON-lines text; a line that is no phrasing is an error naming it."""
    phrasings: list[Phrasing] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            row = json.loads(line)
            phrasing = Phrasing(str(row["text"]), str(row["kind"]), dict(row["params"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f'{where}: expected {{"text": ..., "kind": ..., "params": {{...}}}} ({exc})'
            ) from None
        try:
            make_task(phrasing.text, phrasing.kind, phrasing.params)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if set(phrasing.params) != set(KINDS[phrasing.kind]):
            raise ValueError(
                f"{where}: {phrasing.kind} takes exactly the params {list(KINDS[phrasing.kind])}"
            )
        if phrasing.text.casefold() in seen:
            raise ValueError(f"{where}: {phrasing.text!r} is there twice")
        seen.add(phrasing.text.casefold())
        phrasings.append(phrasing)
    return phrasings


def parser_agreement(phrasings: list[Phrasing]) -> dict[str, Any]:
    """How many phrasings the parser reads as the file says, and what it made of the others."""
    misread = []
    for p in phrasings:
        found = parse_instruction(p.text)
        if not (isinstance(found, Parsed) and (found.kind, found.params) == (p.kind, p.params)):
            misread.append({"text": p.text, "expected": {"kind": p.kind, **p.params}, "read": repr(found)})
    return {"agrees": len(phrasings) - len(misread), "of": len(phrasings), "misread": misread}


def summarise(
    phrasings: list[Phrasing], per_task: dict[str, float], episodes_per_task: int
) -> dict[str, Any]:
    """Success per kind, per family and overall; each phrasing weighs the same (each was played
    ``episodes_per_task`` times)."""
    task_ids = [make_task(p.text, p.kind, p.params).task_id for p in phrasings]
    by: dict[str, dict[str, list[float]]] = {"kind": defaultdict(list), "family": defaultdict(list)}
    for p, task_id in zip(phrasings, task_ids, strict=True):
        by["kind"][p.kind].append(per_task[task_id])
        by["family"][p.family].append(per_task[task_id])

    def rate(values: list[float]) -> dict[str, Any]:
        return {"success": round(sum(values) / len(values), 4), "phrasings": len(values),
                "episodes": len(values) * episodes_per_task}  # fmt: skip

    every = [per_task[t] for t in task_ids]
    return {
        "overall": rate(every),
        "per_family": {f: rate(v) for f, v in sorted(by["family"].items())},
        "per_kind": {k: rate(by["kind"][k]) for k in KINDS if k in by["kind"]},
        "per_phrasing": [
            {"text": p.text, "kind": p.kind, "success": per_task[t]}
            for p, t in zip(phrasings, task_ids, strict=True)
        ],
    }


def _policy(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The policy to score and what it is: a saved version's folder, or a registry version."""
    from distrl_core.policy import load_policy

    if args.policy_dir:
        return load_policy(Path(args.policy_dir)).eval(), {"policy_dir": str(args.policy_dir)}
    from ops.embedded import configure_embedded

    home = configure_embedded(args.home, quiet=True, prefect=False)
    from storage.registry import PolicyRegistry

    registry = PolicyRegistry()
    ref = str(args.version) if args.version is not None else args.policy
    try:
        fetched = registry.fetch(ref)
    except LookupError as exc:
        raise SystemExit(f"error: {ref}: {exc} (is --home {args.home} the home `distrl run` used?)") from None
    described = {"home": str(home), "ref": ref, "version": fetched.version, "registry": registry.name}
    return load_policy(fetched.path).eval(), described


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", default=".distrl/demo", help="embedded home (default: %(default)s)")
    parser.add_argument("--policy", default="champion", help="registry alias (default: %(default)s)")
    parser.add_argument("--version", type=int, help="a version number instead of the alias")
    parser.add_argument("--policy-dir", help="a saved policy version's folder instead of a registry")
    parser.add_argument("--family", choices=["general", "webshop"], help="only one family's phrasings")
    parser.add_argument("--episodes", type=int, default=3, help="greedy episodes per phrasing (default: 3)")
    parser.add_argument("--no-compare", dest="compare", action="store_false",
                        help="skip scoring the generated test split beside it")  # fmt: skip
    parser.add_argument("--data", default=str(DATA), help="the phrasings (default: %(default)s)")
    parser.add_argument("--label", default="run", help="names the result file (default: %(default)s)")
    parser.add_argument("--out", help="result JSON (default: bench/results/free_phrasings_LABEL.json)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")

    import torch

    torch.set_num_threads(1)  # the held-out evaluation's setting on the 2-core machines
    from simulators.evaluation import HELDOUT_SEED, estimate_success
    from simulators.simdroid.tasks import load_tasks

    phrasings = load_phrasings(Path(args.data).read_text(encoding="utf-8").splitlines(), args.data)
    phrasings = [p for p in phrasings if args.family in (None, p.family)]
    policy, described = _policy(args)
    tasks = [make_task(p.text, p.kind, p.params) for p in phrasings]
    started = time.monotonic()
    estimate = estimate_success(policy, tasks, episodes_per_task=args.episodes, seed=HELDOUT_SEED)
    result: dict[str, Any] = {
        "bench": "free_phrasings",
        "data": args.data,
        "policy": described,
        "protocol": {
            "episodes_per_task": args.episodes,
            "seed": HELDOUT_SEED,
            "greedy": True,
            "family": args.family or "all",
            "verdict": "sim_rules",
        },
        "parser": parser_agreement(phrasings),
        **summarise(phrasings, estimate.per_task, args.episodes),
        "ci95_overall": [round(estimate.ci_low, 4), round(estimate.ci_high, 4)],
        "seconds": round(time.monotonic() - started, 1),
    }
    if args.compare:
        families = sorted({p.family for p in phrasings})
        test = [t for t in load_tasks(split="test") if t.family in families]
        generated = estimate_success(policy, test, episodes_per_task=args.episodes, seed=HELDOUT_SEED)
        result["generated_test_split"] = {
            "success": round(generated.success, 4), "ci95": [round(generated.ci_low, 4), round(generated.ci_high, 4)],
            "per_family": {f: round(s, 4) for f, s in generated.per_family.items()}, "tasks": len(test),
        }  # fmt: skip
    result["machine"] = machine()
    out = Path(args.out) if args.out else RESULTS / f"free_phrasings_{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    overall = result["overall"]
    print(f"free phrasings: {overall['success']:.1%} of {overall['phrasings']} phrasings "
          f"[{estimate.ci_low:.1%}, {estimate.ci_high:.1%}]; parser reads {result['parser']['agrees']}/"
          f"{result['parser']['of']} as written")  # fmt: skip
    for kind, row in result["per_kind"].items():
        print(f"  {kind:<18} {row['success']:.1%} ({row['phrasings']} phrasings)")
    if "generated_test_split" in result:
        print(f"generated test split, same families: {result['generated_test_split']['success']:.1%}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
