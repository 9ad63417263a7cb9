"""Each config key's type, default and one-line description, read from the dataclass itself.

The description is the field's trailing `# comment`, else the comment line(s) directly above it (the way
simple-parsing documents fields), so `--help`, validation and the docs share one source: the config class.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import textwrap
import tokenize
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from omegaconf import MISSING

HIDDEN_KEYS = ("kind",)  # set by the command itself, never by a user


@dataclass(frozen=True)
class KeyDoc:
    key: str  # dotted: rollout.backend, cluster.nodes, phases[].steps
    type: str
    default: str
    description: str


@cache
def type_hints(cls: type) -> dict[str, Any]:
    """`typing.get_type_hints(cls)`, evaluated once per class (the annotations are strings; evaluating them is
    most of what building the CLI's flags cost, field by field). Read it, never change it."""
    return typing.get_type_hints(cls)


@cache
def _own_comments(cls: type) -> dict[str, str]:
    """field name -> comment, for the fields written in `cls`'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    above: list[str] = []  # comment lines directly above the current statement
    trailing: list[str] = []  # comments inside or after the current statement
    statement: list[tokenize.TokenInfo] = []
    body_col = None
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.INDENT and body_col is None:
            body_col = token.end[1]
        elif token.type == tokenize.COMMENT:
            (trailing if statement else above).append(token.string.lstrip("#").strip())
        elif token.type == tokenize.NL:
            if not statement and previous != tokenize.COMMENT:
                above = []  # a blank line ends the comment block above
        elif token.type == tokenize.NEWLINE:
            first = statement[0] if statement else None
            is_field = (
                first is not None and first.type == tokenize.NAME and first.start[1] == body_col
                and len(statement) > 1 and statement[1].string == ":"
            )
            if is_field and (trailing or above):
                comments[first.string] = " ".join(trailing or above)
            statement, trailing, above = [], [], []
        elif token.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER):
            statement.append(token)
        previous = token.type
    return comments


def field_description(cls: type, name: str) -> str:
    """The comment of field `name`, from the nearest class in the MRO that documents it ("" if none)."""
    for klass in cls.__mro__:
        if name in _own_comments(klass):
            return _own_comments(klass)[name]
    return ""


def _type_name(hint: Any) -> str:
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if type(None) in typing.get_args(hint):
        return f"{_type_name(args[0])}|null"
    origin = typing.get_origin(hint)
    if origin in (list, dict):
        return f"{origin.__name__}[{','.join(_type_name(arg) for arg in args)}]"
    return "any" if hint is Any else getattr(hint, "__name__", str(hint))


def _value_text(value: Any) -> str:
    if value is MISSING:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return '""'
    return str(value)


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass a field holds: itself, or the item type of a list."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return item if dataclasses.is_dataclass(item) else None
    return None


def config_keys(cls: type, prefix: str = "") -> list[KeyDoc]:
    """Every key a user may set on `cls`, nested dataclasses as dotted keys (`phases[].steps` for a list)."""
    hints = type_hints(cls)
    keys: list[KeyDoc] = []
    for field in dataclasses.fields(cls):
        if field.name in HIDDEN_KEYS:
            continue
        hint, key = hints[field.name], f"{prefix}{field.name}"
        nested = _dataclass_in(hint)
        if nested is not None and nested is hint:
            keys.extend(config_keys(nested, prefix=f"{key}."))
            continue
        keys.append(KeyDoc(key, _type_name(hint), _value_text(_default(field)), field_description(cls, field.name)))
        if nested is not None:
            keys.extend(config_keys(nested, prefix=f"{key}[]."))
    return keys
