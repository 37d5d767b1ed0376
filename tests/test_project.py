"""The repository's own tooling agrees with itself: the Makefile, pyproject.toml and pre-commit."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def _requires_python() -> SpecifierSet:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return SpecifierSet(project["requires-python"])


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_python_is_the_one_requires_python_allows():
    printed = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "--eval",
            "print-python-version: ; @echo $(PYTHON_VERSION)",
            "print-python-version",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    major, minor = (int(part) for part in printed.split("."))
    spec = _requires_python()
    assert spec.contains(f"{major}.{minor}.0") and spec.contains(f"{major}.{minor}.99")
    assert not spec.contains(f"{major}.{minor + 1}.0") and not spec.contains(f"{major}.{minor - 1}.99")


def test_running_python_satisfies_requires_python():
    assert _requires_python().contains(".".join(map(str, sys.version_info[:3])))


def _lint_recipe() -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index("lint: venv") + 1
    recipe = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().removeprefix("$(BIN)/"))
    return recipe


def test_pre_commit_runs_what_make_lint_runs():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert all(repo["repo"] == "local" for repo in config["repos"])
    assert all(hook["language"] == "system" and hook["pass_filenames"] is False for hook in hooks)
    entries = [hook["entry"].removeprefix(".venv/bin/") for hook in hooks]
    assert entries == _lint_recipe()


def test_gym_extra_is_named_when_gymnasium_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # None in sys.modules: the import fails
    monkeypatch.delitem(sys.modules, "simulators.gym_env", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'distrl\[gym\]'"):
        import simulators.gym_env  # noqa: F401


def test_the_main_job_runs_without_the_gym_extra():
    code = (
        "import sys; sys.modules['gymnasium'] = None\n"
        "import ops.cli, ops.demo, flows.train_local, tasks.collector, tasks.learner"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def _extras_make_venv_leaves_out() -> set[str]:
    """The optional extras that `make venv` (`pip install -e '.[dev]'`) does not install."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed, todo = set(), ["dev"]
    while todo:
        name = todo.pop()
        installed.add(name)
        for requirement in extras[name]:
            match = re.fullmatch(r"distrl\[([\w,-]+)\].*", requirement)
            todo += [n for n in (match.group(1).split(",") if match else ()) if n not in installed]
    return set(extras) - installed


def test_mypy_packages_import_no_module_of_an_extra_make_venv_leaves_out():
    # `make lint` runs mypy on a fresh .venv: a module of such an extra (e.g. `gguf` of
    # `pretrained`) would be "cannot find implementation or library stub" there.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = config["project"]["optional-dependencies"]
    left_out = {
        re.split(r"[<>=!~\[ ;]", requirement)[0].replace("-", "_").lower()
        for extra in _extras_make_venv_leaves_out()
        for requirement in extras[extra]
    }
    assert "gguf" in left_out
    found = []
    for package in config["tool"]["mypy"]["packages"]:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in left_out]
    assert not found, f"modules of extras `make venv` does not install are imported: {found}"


def test_convert_gguf_without_the_gguf_package_names_the_fix(tmp_path, monkeypatch):
    from distrl_core.policy.pretrained import convert_gguf

    monkeypatch.setitem(sys.modules, "gguf", None)  # None in sys.modules: not importable
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF")
    with pytest.raises(ImportError, match="make pretrained"):
        convert_gguf(source, tmp_path / "out")


def test_the_shipped_packages_are_the_code_layers_and_the_console_script_resolves():
    import importlib

    from tests.test_imports import LAYERS

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = [name.rstrip("*") for name in config["tool"]["setuptools"]["packages"]["find"]["include"]]
    assert set(shipped) == set(LAYERS) - {"bench", "tests"}
    assert set(config["tool"]["mypy"]["packages"]) == set(LAYERS) - {"tests"}
    module, _, function = config["project"]["scripts"]["distrl"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
