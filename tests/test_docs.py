"""The docs stay true to the code: the configuration table is the settings classes' own, every
`DISTRL_*` variable they name is read by something, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ops import config_table

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "prefect.yaml"]
CODE = ("distrl_core", "simulators", "storage", "tasks", "flows", "ops")
# A clone has none of these: written in pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "ARCHITECTURE" + r"(\.md| §)", "STACK" + r"\.md"]))
# An issue tracker's numbers mean nothing to a reader of the repository (written apart, as above).
TRACKER = re.compile(r"\b[Ii]ssues?" + r" #?\d+")


def test_the_configuration_table_is_rendered_from_the_settings_classes() -> None:
    written = config_table.current_in(config_table.DOC.read_text(encoding="utf-8"))
    assert written == config_table.render(), (
        "docs/operations.md's configuration table is out of date: run `python -m ops.config_table --write`"
    )


def test_every_documented_variable_is_read() -> None:
    known = config_table.variables()
    for doc in DOCS:
        for name in set(re.findall(r"DISTRL_[A-Z0-9_]*", doc.read_text(encoding="utf-8"))):
            if name.endswith("_"):  # a family, as in `DISTRL_REPLAY_*`
                assert any(k.startswith(name) for k in known), f"{doc.name}: no variable starts with {name}"
            else:
                assert name in known, f"{doc.name} documents {name}, which no setting reads"


def test_variables_read_by_name_are_read() -> None:
    sources = [
        p.read_text(encoding="utf-8")
        for package in CODE
        for p in (ROOT / package).rglob("*.py")
        if p.name not in ("config_table.py", "cli_errors.py")
    ]
    for name in config_table.DIRECT_VARIABLES:
        assert any(name in text for text in sources), f"{name} is documented but no code reads it"


def test_nothing_refers_outside_the_repository() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    offenders = []
    for name in filter(None, listed.decode().split("\0")):
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree
            continue
        text = path.read_bytes().decode("utf-8", errors="ignore")
        offenders += [f"{name}:{m.group(0)}" for m in OUTSIDE.finditer(text)]
        offenders += [f"{name}:{m.group(0)}" for m in TRACKER.finditer(text)]
    assert not offenders, f"references to files a clone does not have, or to a tracker's issues: {offenders}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_docs_resolve() -> None:
    for doc in DOCS[:-1]:
        for target, anchor in re.findall(
            r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", doc.read_text(encoding="utf-8")
        ):
            path = (doc.parent / target) if target else doc
            assert path.is_file(), f"{doc.name} links to {target}, which does not exist"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
                assert anchor in {_anchor(h) for h in headings}, f"{doc.name} links to {target}#{anchor}"


def test_every_function_a_test_replaces_is_named_in_the_testing_docs() -> None:
    """docs/architecture.md's "Testing approach" lists what tests replace with `monkeypatch`
    (beside environment variables and the working directory); a new replacement is named there too."""
    import ast

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    readme = text[text.index("## Testing approach") :]
    replaced = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("setattr", "setitem", "delattr", "delitem")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "monkeypatch"
            ):
                target, name = node.args[0], node.args[1]
                if isinstance(target, ast.Constant) and isinstance(target.value, str):
                    # setattr("module.NAME", value): the name is the dotted target's last part
                    owner, _, shown = target.value.rpartition(".")
                    replaced.add((str(path.relative_to(ROOT)), owner, shown))
                    continue
                shown = name.value if isinstance(name, ast.Constant) else ast.unparse(name)
                replaced.add((str(path.relative_to(ROOT)), ast.unparse(target), shown))
    missing = [
        f"{file}: {target}[{name}]"
        for file, target, name in sorted(replaced)
        if file not in readme or name not in readme
    ]
    assert replaced and not missing, (
        f"docs/architecture.md's Testing approach does not name what these tests replace: {missing}"
    )


def test_the_distrl_up_recipe_is_the_one_it_prints(tmp_path: Path) -> None:
    from ops.up import Stack, UpConfig, recipe

    stack = Stack(UpConfig(run_dir=tmp_path, project_dir=ROOT))
    stack.ports = {"s3": 1, "mlflow": 2, "prefect": 3}
    printed = stack.describe().splitlines()
    assert [f"  {line}" for line in recipe()] == printed[-len(recipe()) :]

    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\nsource \.distrl/up/env\.sh\n(.*?)```", text, flags=re.DOTALL)
    assert block, "docs/operations.md has no `source .distrl/up/env.sh` block"
    assert block.group(1).splitlines() == recipe(), (
        "docs/operations.md's `distrl up` recipe differs from what `distrl up` prints (ops/up.py recipe())"
    )


def test_every_file_the_docs_name_exists() -> None:
    # a module moved between packages leaves no stale path behind in the docs
    named = re.compile(r"\b(?:" + "|".join(CODE) + r"|bench|tests)/[\w/]+\.py\b")
    missing = [
        f"{doc.name}: {path}"
        for doc in DOCS
        for path in sorted(set(named.findall(doc.read_text(encoding="utf-8"))))
        if not (ROOT / path).is_file()
    ]
    assert not missing, f"the docs name files that do not exist: {missing}"


def test_the_architecture_map_names_every_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [package for package in CODE if not re.search(rf"^{package}/ ", text, flags=re.MULTILINE)]
    assert not missing, f"docs/architecture.md's map of packages leaves out {missing}"


def test_the_configuration_table_holds_every_settings_class() -> None:
    import ast

    declared = {
        node.name
        for package in CODE
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(
            ast.unparse(base) in ("BaseSettings", "pydantic_settings.BaseSettings") for base in node.bases
        )
    }
    assert declared == {settings.__name__ for settings in config_table.SETTINGS}, (
        "a settings class is missing from ops/config_table.py's SETTINGS (or it lists one that is gone)"
    )
