"""A job file's problems, collected and said in its own words: `key.path: what is expected`, pydantic's errors too.

So that the loader reports every problem of a file at once, each naming the key the user wrote."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from gobblin_py.fs.paths import JOB_DIR
from gobblin_py.suggest import did_you_mean


class Collector:
    """Accumulates `key.path: message` problems of one file."""

    def __init__(self, file: str = "the job file", job_dir: str | None = None) -> None:
        self.problems: list[str] = []
        self.file = file
        self.context = {JOB_DIR: job_dir} if job_dir else None  # for path settings' "did you mean to run from"

    def unknown(self, prefix: str, name: Any, what: str, known: list[str]) -> None:
        """`name` (under `prefix`) is not one of `known`: named, with the closest known names and all of them."""
        self.add(f"{prefix}.{name}" if prefix else str(name), unknown_message(what, str(name), known, self.file))

    def add(self, key: str, message: str) -> None:
        self.problems.append(f"{key}: {message}" if key else message)

    def model(self, model: type[BaseModel], data: Any, key: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.add(key, f"expected a mapping of settings, got {type(data).__name__}")
            return None
        try:
            return model.model_validate(dict(data), context=self.context)
        except ValidationError as exc:
            for err in exc.errors():
                self.add(_join(key, err["loc"]), _explain(err, model, self.file))
            return None


def unknown_message(what: str, name: str, known: list[str], file: str) -> str:
    """`unknown key 'sorce' in job.yaml (did you mean 'source'? expected one of: …)`."""
    section, dot, rest = name.partition(".")
    # `source.bootstrap_servers:` written flat
    hint = f"keys nest: write {section}: {{{rest}: ...}};" if dot and section in known else did_you_mean(name, known)
    listed = f"expected one of: {', '.join(known) or 'none'}" if known else "see the plugin's settings"
    return f"unknown {what} {name!r} in {file} ({f'{hint} ' if hint else ''}{listed})"


def _join(prefix: str, loc: tuple[Any, ...]) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def _owner(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The (nested) settings model that holds the last key of `loc`."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        nested = [a for a in (field.annotation, *getattr(field.annotation, "__args__", ())) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _keys(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _explain(err: Mapping[str, Any], model: type[BaseModel], file: str) -> str:
    kind = err["type"]
    owner = _owner(model, tuple(err["loc"]))
    if kind == "extra_forbidden":
        return unknown_message("key", str(err["loc"][-1]), _keys(owner) if owner is not None else [], file)
    if kind == "missing":
        name = str(err["loc"][-1])
        field = next((f for n, f in owner.model_fields.items() if name in (n, f.alias)), None) if owner else None
        expected = f" ({_type_name(field.annotation)})" if field is not None else ""
        return f"required setting is missing{expected}"
    got = err.get("input")
    shown = f"; got {got!r}" if got is not None and not isinstance(got, Mapping) else ""
    message = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError says nothing
    return message if shown and str(got) in message else f"{message}{shown}"


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
