"""Command-line options derived from a pydantic parameter model, so that each default, description and
constraint is written once, in the model, whether a flow starts from Python, a deployment or `distrl`.

    options = ModelOptions(TrainLocalParams, ("minutes", "collectors", "sync"))
    options.add_to(parser)        # --minutes (default 6.0, > 0), --collectors, --sync
    params = options.build(args)  # a TrainLocalParams; a mistake is a UserError naming the flag

A field becomes `--kebab-case` (or the flag given in `flags`); its value is checked by pydantic against
the field's type and constraints as argparse reads it, so a bad flag is an argparse error. A `bool`
field is a switch away from its default (`--sync`, `--no-ui`), a `Literal` one offers its values as
choices, a `dict` one takes `KEY=VALUE` pairs (JSON values, else text). An option not given is left
out of the namespace, so the model's own default applies.
"""

from __future__ import annotations

import argparse
import json
import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import AllowInfNan, BaseModel, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ops.cli_errors import UserError, pydantic_problem, validation_message

M = TypeVar("M", bound=BaseModel)


# A whole number no field may exceed: an int field without its own ceiling, or a number inside a
# KEY=VALUE option (Python's ints are unbounded; numpy, DuckDB and torch overflow past 64 bits).
MAX_INT = 2**63 - 1


def _key_value(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return key, value
    _check_numbers(key, parsed)
    return key, parsed


def _check_numbers(key: str, value: object) -> None:
    """JSON reads 1e400 as inf and NaN as nan, and takes integers of any length: refuse them here."""
    if isinstance(value, dict):
        for item in value.values():
            _check_numbers(key, item)
    elif isinstance(value, list):
        for item in value:
            _check_numbers(key, item)
    elif isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{key}: must be a finite number, got {value}")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise argparse.ArgumentTypeError(f"{key}: must be between -{MAX_INT} and {MAX_INT}, got {value}")


def _without_none(annotation: Any) -> Any:
    """`X | None` → `X`: None is what an option left out means, never something typed."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = tuple(a for a in get_args(annotation) if a is not type(None))
        return rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007 — built from a tuple
    return annotation


def _value_parser(info: FieldInfo, annotation: Any) -> Callable[[str], Any]:
    """Text → the field's value, checked by pydantic against the field's type and constraints."""
    # inf and nan pass a `gt=0` bound; no flag means either. An int field without a ceiling of its
    # own gets `MAX_INT`, so that no flag's number overflows where it is used.
    metadata = [*info.metadata, *([AllowInfNan(False)] if annotation is float else [])]
    if annotation is int and not any(hasattr(m, "le") or hasattr(m, "lt") for m in info.metadata):
        metadata.append(Field(le=MAX_INT))
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[(annotation, *metadata)] if metadata else annotation)

    def parse(text: str) -> Any:
        try:
            return adapter.validate_python(text)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(f"{pydantic_problem(exc.errors()[0])}, got {text!r}") from None

    return parse


def _help(info: FieldInfo, default: object) -> str:
    text = (info.description or "").replace("%", "%%")  # argparse formats help with %
    if default is True:
        return f"turn off (on by default): {text}"
    shown = default not in (None, {}, []) and not isinstance(default, bool)
    return f"{text} (default: {default})" if shown else text


@dataclass(frozen=True)
class ModelOptions(Generic[M]):
    """The fields of `model` that a command exposes, and the flag of each where not `--kebab-case`."""

    model: type[M]
    fields: Sequence[str]
    flags: Mapping[str, str] = field(default_factory=dict)
    # This command's own defaults where they differ from the model's (`distrl demo`'s base).
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def default(self, name: str) -> Any:
        if name in self.defaults:
            return self.defaults[name]
        return self.model.model_fields[name].get_default(call_default_factory=True)

    def flag(self, name: str) -> str:
        default = self.default(name)
        if default is True:
            return f"--no-{name.replace('_', '-')}"
        return self.flags.get(name, f"--{name.replace('_', '-')}")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        for name in self.fields:
            info = self.model.model_fields[name]
            default = self.default(name)
            common: dict[str, Any] = {
                "dest": name,
                "default": argparse.SUPPRESS,
                "help": _help(info, default),
            }
            annotation = _without_none(info.annotation)
            if annotation is bool:
                action = "store_false" if default else "store_true"
                parser.add_argument(self.flag(name), action=action, **common)
            elif get_origin(annotation) is dict:
                parser.add_argument(
                    self.flag(name), nargs="*", type=_key_value, metavar="KEY=VALUE", **common
                )
            elif get_origin(annotation) is Literal:
                parser.add_argument(self.flag(name), choices=get_args(annotation), **common)
            else:
                metavar = (
                    "YYYY-MM-DD"
                    if annotation is date
                    else self.flag(name).lstrip("-").upper().replace("-", "_")
                )
                parser.add_argument(
                    self.flag(name), type=_value_parser(info, annotation), metavar=metavar, **common
                )

    def build(self, args: argparse.Namespace, **fixed: Any) -> M:
        """The model from the options given (the rest keep the model's defaults) and `fixed` values."""
        given = {name: getattr(args, name) for name in self.fields if hasattr(args, name)}
        given = {name: value for name, value in self.defaults.items() if name not in fixed} | given
        for name, value in given.items():
            if get_origin(_without_none(self.model.model_fields[name].annotation)) is dict:
                given[name] = dict(value)
        try:
            return self.model(**given, **fixed)
        except ValidationError as exc:  # a check across fields, or of a value inside a dict option
            raise UserError(
                validation_message(exc, {name: self.flag(name) for name in self.fields})
            ) from None
