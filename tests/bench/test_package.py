"""bench/ is a package run from the repository root as `python -m bench.<name>`: no file edits
sys.path, and every command the docs give runs it that way."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python_files() -> list[Path]:
    return sorted([*(ROOT / "bench").rglob("*.py"), *(ROOT / "tests").rglob("*.py")])


def test_no_bench_or_test_file_edits_sys_path():
    edits = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                edits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not edits, f"sys.path is touched (run benches as `python -m bench.<name>`): {edits}"


def test_docs_run_benches_as_modules():
    texts = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md"))]
    texts += [*(ROOT / "bench").glob("*.py"), *(ROOT / "bench").glob("*.sh")]
    stale = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in texts
        for match in re.finditer(r"python3?\s+(?:\S*/)?bench/\w+\.py", path.read_text())
    ]
    assert not stale, f"run benches as `python -m bench.<name>`: {stale}"


def test_a_bench_runs_as_a_module_from_the_repository_root():
    done = subprocess.run(
        [sys.executable, "-m", "bench.env_throughput", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--seconds" in done.stdout
