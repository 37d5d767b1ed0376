"""Mutation check of the learner options' reference tests: break each option's core on purpose and
see its reference test fail.

Each mutation is one exact edit of an algorithm module (the sign of the positive-replay bonus, the
proximal policy of decoupled PPO swapped for the behaviour policy, ...). It is applied to a copy of
`distrl_core/` and `tests/algos/` in a temporary folder, never to the working tree (a run started
meanwhile would import the mutant), and that copy's tests run in a fresh interpreter. A mutation
whose tests still pass is a gap in the tests; the report says which.

    .venv/bin/python -m bench.mutations [--out mutations]

Output: bench/results/<out>.json, one entry per mutation (the edit, the tests run, failed/passed).
Exit status 1 when a mutation survives or the unmutated copy does not pass.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bench._common import write_result

REPO = Path(__file__).resolve().parents[1]
COPIED = (
    "distrl_core",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/algos",
    "tests/learner",
    "pyproject.toml",
)
MOBILERL, DECOUPLED = "distrl_core/algos/mobilerl.py", "distrl_core/algos/decoupled.py"
MOBILERL_TESTS, DECOUPLED_TESTS = "tests/algos/test_mobilerl.py", "tests/algos/test_decoupled.py"
DECOUPLED_LOSS, SHARED_LOSS = (
    "distrl_core/learner/losses/decoupled_ppo.py",
    "distrl_core/learner/losses/base.py",
)
DECOUPLED_POSITIVE_TEST = "tests/learner/test_mobilerl_options.py::test_decoupled_ppo_pushes_no_action_down_with_positive_advantages_only"
DECOUPLED_RETRACE_TEST = "tests/learner/test_mobilerl_options.py::test_decoupled_ppo_on_retrace_shares_aride_s_targets_and_priorities"


@dataclass(frozen=True)
class Mutation:
    option: str  # the LearnerConfig option whose core it breaks
    what: str
    path: str
    old: str  # must occur exactly once in the file
    new: str
    tests: str


MUTATIONS = (
    Mutation("positive_replay", "the bonus's sign: successes of hard tasks replayed less", MOBILERL,
             "return 1.0 + strength * solved * (1.0 - rate)", "return 1.0 - strength * solved * (1.0 - rate)",
             MOBILERL_TESTS),
    Mutation("positive_replay", "easy tasks boosted instead of hard ones", MOBILERL,
             "return 1.0 + strength * solved * (1.0 - rate)", "return 1.0 + strength * solved * rate",
             MOBILERL_TESTS),
    Mutation("failure_curriculum", "a never-solved task is never given up", MOBILERL,
             "(successes <= 0)", "(successes < 0)", MOBILERL_TESTS),
    Mutation("failure_curriculum", "N off by one: given up after N + 1 attempts", MOBILERL,
             "(attempts >= min_attempts)", "(attempts > min_attempts)", MOBILERL_TESTS),
    Mutation("shortest_path", "the exponent's sign: long successes rewarded more", MOBILERL,
             "ratio**exponent", "ratio**(-exponent)", MOBILERL_TESTS),
    Mutation("shortest_path", "the factor not capped at 1", MOBILERL,
             ".clamp(max=1.0)  # (B,)", "  # (B,)", MOBILERL_TESTS),
    Mutation("decoupled_ppo", "pi_prox/mu not truncated", DECOUPLED,
             "weight = behaviour.clamp(max=weight_max)", "weight = behaviour", DECOUPLED_TESTS),
    Mutation("decoupled_ppo", "the ratio taken against the behaviour policy, not the proximal one", DECOUPLED,
             "ratio = torch.exp((logp - prox)", "ratio = torch.exp((logp - mu)", DECOUPLED_TESTS),
    Mutation("decoupled_ppo", "the behaviour weight dropped", DECOUPLED,
             "pg = -masked_mean(weight * surrogate, real)", "pg = -masked_mean(surrogate, real)",
             DECOUPLED_TESTS),
    Mutation("decoupled_ppo", "positive_advantages_only ignored: signed advantages", SHARED_LOSS,
             "        advantages = advantages.clamp(min=0.0)\n    return advantages",
             "        pass\n    return advantages", DECOUPLED_POSITIVE_TEST),
    Mutation("decoupled_ppo", "decoupled_retrace ignored: G_t - V(s_t) and uniform priorities", DECOUPLED_LOSS,
             "        if cfg.decoupled_retrace:", "        if False:", DECOUPLED_RETRACE_TEST),
)  # fmt: skip


def run_tests(copy: Path, *tests: str) -> tuple[int, str]:
    """pytest on the copy, its `distrl_core` first on the path: (exit status, summary line)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(copy), *tests],
        cwd=copy,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "HOME": str(copy)},
        capture_output=True,
        text=True,
    )
    lines = [line for line in result.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    return result.returncode, lines[-1] if lines else result.stdout[-300:] + result.stderr[-300:]


def check_copy_is_imported(copy: Path) -> None:
    found = subprocess.run(
        [sys.executable, "-c", "import distrl_core; print(distrl_core.__file__)"],
        cwd=copy,
        env={"PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not found.startswith(str(copy)):
        raise SystemExit(f"the copy's distrl_core is not the one imported ({found}); nothing would be tested")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="mutations", help="bench/results/<out>.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="distrl-mutations-") as tmp:
        copy = Path(tmp)
        for name in COPIED:
            source, target = REPO / name, copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)
        check_copy_is_imported(copy)
        all_tests = sorted({m.tests for m in MUTATIONS})
        status, summary = run_tests(copy, *all_tests)
        if status != 0:
            raise SystemExit(f"the unmutated tests fail ({summary}); fix them before checking mutations")
        print(f"unmutated: {summary}")
        report = []
        for mutation in MUTATIONS:
            path = copy / mutation.path
            original = path.read_text()
            if original.count(mutation.old) != 1:
                raise SystemExit(f"{mutation.path} no longer holds {mutation.old!r} once: update MUTATIONS")
            path.write_text(original.replace(mutation.old, mutation.new))
            try:
                status, summary = run_tests(copy, mutation.tests)
            finally:
                path.write_text(original)
            caught = status != 0
            report.append(asdict(mutation) | {"caught": caught, "summary": summary})
            print(f"{'caught  ' if caught else 'SURVIVED'} {mutation.option:18s} {mutation.what}: {summary}")
    survived = [r for r in report if not r["caught"]]
    path = write_result(args.out, {"baseline": "pass", "mutations": report, "survived": len(survived)})
    print(f"{len(report) - len(survived)}/{len(report)} mutations caught -> {path}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
