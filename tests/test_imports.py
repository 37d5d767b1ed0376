"""Imports point down the layers the README and docs/architecture.md draw:

    tests → bench → flows → tasks → storage → distrl_core

An arrow may skip layers (flows imports distrl_core), never point up. storage takes from
distrl_core only the vocabulary its schema records (`distrl_core.envs.kinds`, which imports
nothing), so reading shards never loads torch. Checked with `ast` over every file, lazy imports
inside functions included."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("distrl_core", "storage", "tasks", "flows", "bench", "tests")  # bottom to top
STORAGE_MAY_IMPORT = {"distrl_core.envs.kinds"}


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            # `from distrl_core.envs import kinds` imports the module distrl_core.envs.kinds
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _storage_may_import(module: str) -> bool:
    # a package on the way to an allowed module, the module, or a name taken from it
    return any(
        module == m or m.startswith(module + ".") or module.startswith(m + ".") for m in STORAGE_MAY_IMPORT
    )


def _violations() -> list[str]:
    bad = []
    for rank, layer in enumerate(LAYERS):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top not in LAYERS or top == layer:
                    continue
                where = f"{path.relative_to(ROOT)}:{line} imports {module}"
                if LAYERS.index(top) > rank:
                    bad.append(f"{where} (an upward import: {layer} sits below {top})")
                elif layer == "storage" and top == "distrl_core" and not _storage_may_import(module):
                    bad.append(f"{where} (storage takes only {sorted(STORAGE_MAY_IMPORT)})")
    return bad


def test_imports_point_down_the_layers():
    assert _violations() == []


def test_the_modules_storage_takes_from_distrl_core_import_nothing_of_the_project():
    for module in STORAGE_MAY_IMPORT:
        path = ROOT / (module.replace(".", "/") + ".py")
        tops = {name.split(".")[0] for _, name in _imports(path)}
        assert not tops & set(LAYERS), f"{module} imports {sorted(tops & set(LAYERS))}"


def test_reading_the_schema_loads_no_torch():
    code = "import sys, storage.schema, storage.catalog; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
