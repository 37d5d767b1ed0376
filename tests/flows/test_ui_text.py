"""Text the Prefect UI shows is drawn there: run names on the timeline, which Prefect 3.9 renders
with a PixiJS bitmap font of the printable ASCII characters only (`chars: BitmapFont.ASCII`, ' ' to
'~', in its UI bundle), so "train_block 105–112" showed as "train_block 105112"; log lines and
artifacts keep to the same characters, so a range reads the same everywhere."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
NAME_ARGS = {"task_run_name", "flow_run_name"}


def drawable(text: str) -> bool:
    return all(" " <= c <= "~" or c == "\n" for c in text)


def _strings(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value


def _shown(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """String constants of run names (given inline or by a naming function) and of log calls."""
    namers: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg in NAME_ARGS and isinstance(keyword.value, ast.Name):
                namers.add(keyword.value.id)
            elif keyword.arg in NAME_ARGS:
                yield from ((node.lineno, s) for s in _strings(keyword.value))
        if isinstance(node.func, ast.Attribute) and node.func.attr in LOG_METHODS:
            yield from ((node.lineno, s) for arg in node.args for s in _strings(arg))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in namers:
            body = node.body[1:] if ast.get_docstring(node) else node.body
            yield from ((stmt.lineno, s) for stmt in body for s in _strings(stmt))


def test_run_names_and_log_lines_use_characters_the_ui_draws() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for package in ("tasks", "flows", "ops")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in _shown(ast.parse(path.read_text(encoding="utf-8")))
        if not drawable(text)
    ]
    assert not offenders, offenders


def test_evaluation_artifacts_use_characters_the_ui_draws() -> None:
    from tasks.evaluation import report_markdown
    from tasks.heldout_curve import CurvePoint, curve_table

    item = {"version": 2, "split": "test", "success": 0.5, "ci_low": 0.375, "ci_high": 0.625, "episodes": 66}
    markdown = report_markdown(item | {"families": {"general": 0.5}}, baseline=item)
    assert "37.5%-62.5%" in markdown and drawable(markdown)
    point = CurvePoint(version=2, seconds=90.0, env_steps=1200, success=0.5, ci_low=0.375, ci_high=0.625)
    (row,) = curve_table([point], champion=2)
    assert row["95% CI"] == "37.5%-62.5%" and row["version"] == "v2 (champion)"
    assert all(drawable(str(value)) for value in (*row.values(), *row.keys()))
