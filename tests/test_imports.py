"""Imports point down the layers the README and docs/architecture.md draw:

    tests → bench → ops → flows → tasks → storage → simulators → distrl_core

An arrow may skip layers (flows imports distrl_core), never point up. distrl_core holds the
algorithm and the agent (policy, learner, losses, the environment protocol and actions); it never
imports `simulators` (SimDroid, the fake ADB server, the ADB env and the loops that run a policy on
them), which sits right above it: everything higher may use both. `ops` (the `distrl` command line,
the embedded mode, the stack of `distrl up`) sits above `flows` because its commands run the
Prefect flows; the flows never reach back into it. storage takes from
distrl_core only the vocabulary its schema records (`distrl_core.envs.kinds`, which imports
nothing), so reading shards never loads torch. Checked with `ast` over every file, lazy imports
inside functions included."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("distrl_core", "simulators", "storage", "tasks", "flows", "ops", "bench", "tests")  # bottom to top
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


def test_the_core_never_imports_the_simulators():
    # also checked by the layer order; said on its own so that a failure names the rule
    bad = [v for v in _violations() if v.startswith("distrl_core") and " simulators" in v]
    assert bad == []
    code = (
        "import sys, pkgutil, importlib, distrl_core\n"
        "for m in pkgutil.walk_packages(distrl_core.__path__, 'distrl_core.'): importlib.import_module(m.name)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'simulators'], 'simulators loaded'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_every_package_is_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages == set(LAYERS), f"a package outside the layer order: {sorted(packages ^ set(LAYERS))}"


def test_reading_the_schema_loads_no_torch():
    code = "import sys, storage.schema, storage.catalog; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
