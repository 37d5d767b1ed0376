"""The configuration table of docs/operations.md, rendered from the settings classes.

    python -m ops.config_table            # print it
    python -m ops.config_table --write    # replace it in docs/operations.md

A variable is documented only if a settings class declares it (with its default and description)
or it is one of the few read by name (``DIRECT_VARIABLES``); tests/test_docs.py fails when the
table in the docs differs from this rendering, or the docs name a variable that nothing reads.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from unittest import mock

from pydantic import ByteSize
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from ops.postgres import PostgresSettings
from storage.lease import LeaseSettings
from storage.registry import RegistrySettings
from storage.replay_config import ReplaySettings
from storage.sql_limits import SqlSettings
from storage.store import StoreSettings

SETTINGS: tuple[type[BaseSettings], ...] = (
    StoreSettings,
    RegistrySettings,
    ReplaySettings,
    SqlSettings,
    PostgresSettings,
    LeaseSettings,
)

DIRECT_VARIABLES: dict[str, tuple[str, str]] = {
    # name: (default, meaning) of the variables read by name, outside a settings class
    "DISTRL_JUDGE_BASE_URL": ("unset", "API root of the OpenAI-compatible judge (`distrl_core/evaluators/judge_http.py`)"),
    "DISTRL_JUDGE_MODEL": ("unset", "model name sent to that judge"),
    "DISTRL_JUDGE_API_KEY": ("unset", "the judge's API key (else `OPENAI_API_KEY`); sent only in the Authorization header, never logged"),
    "DISTRL_PROJECT_DIR": ("unset", "the checkout a worker's flow runs start in (the deployments' pull step); set on every worker machine"),
    "DISTRL_HASH_CACHE": ("`~/.cache/distrl/checkpoint_hashes.json`", "cache of pretrained checkpoints' content hashes (`distrl_core/policy/backbone.py`)"),
    "DISTRL_LEARNER_THREADS": ("torch's default", "torch threads of a learner process (acting roles always use one)"),
    "DISTRL_LEARNER_RANK_KEY": ("drawn per run on one host", "64 hex digits: the key that admits learner ranks and encrypts what rank 0 sends them (`tasks/rank_channel.py`); the same on every learner host when ranks span hosts; a secret"),
}  # fmt: skip

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def variables() -> set[str]:
    """Every `DISTRL_*` variable the settings classes and the direct readers understand."""
    names = set(DIRECT_VARIABLES)
    for settings in SETTINGS:
        prefix = settings.model_config["env_prefix"]
        names |= {f"{prefix}{name}".upper() for name in settings.model_fields}
    return names


def render() -> str:
    """The markdown tables: one per settings class, then the variables read by name."""
    parts = []
    for settings in SETTINGS:
        prefix = settings.model_config["env_prefix"]
        summary = " ".join((settings.__doc__ or "").split("\n\n")[0].split())
        rows = [
            (f"{prefix}{name}".upper(), _default(field), _cell(field.description or ""))
            for name, field in settings.model_fields.items()
        ]
        parts.append(_table(f"`{settings.__module__}.{settings.__name__}`: {summary}", rows))
    direct = [(name, default, meaning) for name, (default, meaning) in sorted(DIRECT_VARIABLES.items())]
    parts.append(_table("Read by name, outside a settings class:", direct))
    return "\n\n".join(parts)


def _table(caption: str, rows: list[tuple[str, str, str]]) -> str:
    lines = [caption, "", "| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in rows]
    return "\n".join(lines)


def _default(field: FieldInfo) -> str:
    # The default is what an empty environment gives (a factory may read a fallback variable).
    with mock.patch.dict(os.environ, {}, clear=True):
        value = field.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, ByteSize):
        return f"`{value.human_readable()}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def replace_in(text: str, table: str) -> str:
    """`text` with the part between the markers replaced by `table`."""
    head, found, rest = text.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"{DOC} lacks the markers {START} ... {END}")
    return f"{head}{START}\n{table}\n{END}{tail}"


def current_in(text: str) -> str:
    """The table between the markers of `text`."""
    return text.partition(START)[2].partition(END)[0].strip("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC.name}")
    table = render()
    if parser.parse_args().write:
        DOC.write_text(replace_in(DOC.read_text(encoding="utf-8"), table), encoding="utf-8")
    else:
        print(table)


if __name__ == "__main__":
    main()
