"""Gobblin job files (`.pull`, `.job`, `.properties`, `.conf`) as gobblin-py jobs: resolve, translate, validate.

`load_job` hands these suffixes here; the translated document then goes through the same validation as a YAML
job file, and its problems are reported with the Gobblin key each setting came from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.config.gobblin.mapping import KEYS
from gobblin_py.config.gobblin.resolve import ENV_REF, HOCON_SUFFIXES, PROPERTIES_SUFFIXES, resolve_job
from gobblin_py.config.gobblin.translate import Translation, translate
from gobblin_py.config.loader import JOB_FILE_DIR, SECTIONS, defaults_files, load_document
from gobblin_py.config.model import JobSpec
from gobblin_py.errors import ConfigError

GOBBLIN_SUFFIXES = PROPERTIES_SUFFIXES + HOCON_SUFFIXES
_FROM_TARGET = {r.target: r.key for r in KEYS if r.target}
log = logging.getLogger(__name__)


def is_gobblin_job(path: Path) -> bool:
    return path.suffix.lower() in GOBBLIN_SUFFIXES


def translate_file(path: Path, *, strict: bool = False, env: Mapping[str, str] | None = None,
                   keep_env_refs: bool = False) -> Translation:
    """The translation of a Gobblin job file; ConfigError listing every problem (unused keys too with `strict`).
    `keep_env_refs`: each `${env:VAR}` stays a reference (`ENV_REF`), for `convert`."""
    translation = translate(resolve_job(path, env, keep_env_refs))
    problems = translation.problems + (translation.unused if strict else [])
    if problems:
        plural = "s" if len(problems) != 1 else ""
        listed = "\n".join(f"  {p}" for p in problems)
        raise ConfigError(f"{path}: invalid Gobblin job file ({len(problems)} problem{plural}):\n{listed}")
    return translation


def warnings_of(translation: Translation, strict: bool) -> list[str]:
    """What to tell the user about a valid translation: differences, keys not applied, unused keys."""
    return translation.warnings + ([] if strict else translation.unused)


def load_gobblin_job(path: Path, *, master: str | None = None, strict: bool = False, writer_schema: bool = True) -> JobSpec:
    """A Gobblin job file as a validated JobSpec; the derived Avro schemas are written under the job's work dir."""
    translation = translate_file(path, strict=strict)
    labelled = logging.getLogger().hasHandlers()  # the CLI's log format names the level; a bare stderr does not
    for warning in warnings_of(translation, strict):
        log.warning("%s%s", "" if labelled else "warning: ", warning)
    for note in translation.notes:
        log.info("%s", note)
    document = translation.document
    if translation.schemas:
        work_dir = document.get("job", {}).get("work_dir") or _default_work_dir(defaults_files())
        name = document.get("job", {}).get("name", path.stem)
        place_schemas(translation, Path(work_dir) / "gobblin-compat" / str(name))
    try:
        return load_document(path, document, master=master, writer_schema=writer_schema)
    except ConfigError as exc:
        raise ConfigError(_with_origins(exc.message, translation.origins)) from None


def _default_work_dir(files: list[Path]) -> str:
    work_dir = "./work"
    for file in files:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        work_dir = (data.get("job") or {}).get("work_dir", work_dir)
    return str(work_dir)


def place_schemas(translation: Translation, directory: Path, prefix: str = "") -> list[Path]:
    """Write each derived Avro schema to `directory` (named by table and content) and point its converter at it."""
    from gobblin_py.durable import atomic_write, makedirs_durably

    written: list[Path] = []
    for converter, schema, name in translation.schemas:
        text = json.dumps(schema, indent=2) + "\n"
        digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
        target = directory / f"{prefix}{name}-{digest}.avsc"
        if not target.exists():
            try:
                makedirs_durably(directory)
                atomic_write(target, text.encode())
            except OSError as exc:
                raise ConfigError(f"source.schema: cannot write the Avro schema it describes to {target}: {exc}") from None
        converter["schema"] = str(target)
        written.append(target)
    return written


def _beside(value: Any, paths: dict[str, str]) -> Any:
    """`value` with every string that is one of `paths`' keys replaced by its value, however deep."""
    if isinstance(value, dict):
        return {k: _beside(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_beside(v, paths) for v in value]
    return paths.get(value, value) if isinstance(value, str) else value


def _with_origins(message: str, origins: dict[str, str]) -> str:
    """Each `  key.path: problem` line of a validation message, followed by the Gobblin key that set it."""
    lines = message.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("  ") or ": " not in line:
            continue
        key = line[2:].split(": ", 1)[0]
        origin = _origin(key, origins)
        if origin:
            lines[i] = f"{line} [from {origin}]"
    return "\n".join(lines)


def _origin(key: str, origins: dict[str, str]) -> str | None:
    """The Gobblin key behind a gobblin-py key path: the closest recorded one, or the key that would set it."""
    candidates = [k for k in origins if key == k or key.startswith((k + ".", k + "["))]
    if candidates:
        return origins[max(candidates, key=len)]
    if key in _FROM_TARGET:
        return f"{_FROM_TARGET[key]}, not set"
    return None


_YAML_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MARKED = re.compile(ENV_REF.format("(.*?)"))


def _with_env_refs(path: Path, translation: Translation, strict: bool, target: Path,
                   warnings: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The document to write, with each `${env:VAR}` of the Gobblin file as the YAML loader's `${VAR}` (and a literal
    `${` escaped as `$${`), and the variables kept. Where a reference cannot stay one (its value is parsed while
    translating, or its name is not one the YAML loader reads) the values are written instead, with a warning."""
    try:
        refs = translate_file(path, strict=strict, keep_env_refs=True)
        place_schemas(refs, target.parent, prefix=f"{target.stem}.")
    except ConfigError:
        refs = None
    names = sorted({m.group(1) for m in _MARKED.finditer(json.dumps(refs.document, ensure_ascii=False))}) if refs is not None else []
    env = {name: os.environ.get(name, "") for name in names}
    same = refs is not None and _walk(refs.document, lambda s: _MARKED.sub(lambda m: env[m.group(1)], s)) == translation.document
    if names and same and all(_YAML_VAR.fullmatch(n) for n in names):
        return _walk(refs.document, lambda s: _MARKED.sub(lambda m: f"${{{m.group(1)}}}", s.replace("${", "$${"))), names
    if refs is None or names:
        warnings.append("each ${env:VAR} of the file is written as its value here: one is read while translating "
                        "(a number, a class, a schema) or names no variable the YAML loader reads (write ${VAR} "
                        "by hand where the value should come from the environment)")
    return _walk(translation.document, lambda s: s.replace("${", "$${")), []


def _walk(value: Any, fn: Callable[[str], str]) -> Any:
    """`value` with `fn` applied to every string in it (mappings' values, lists' items)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    return value


@dataclass(frozen=True)
class Converted:
    """A Gobblin job as gobblin-py YAML, what to tell the user, and the schema files written beside it."""

    text: str
    warnings: list[str]
    schema_files: list[Path]


def convert_job(path: Path, output: Path | None, *, strict: bool = False) -> Converted:
    """The YAML job a Gobblin job file translates to, validated as `gobblin-py validate` would, written to `output`
    when given; derived schemas go beside `output` (or beside the Gobblin file), named `<stem>.<table>-<hash>.avsc`."""
    translation = translate_file(path, strict=strict)
    target = output if output is not None else path
    files = place_schemas(translation, target.parent, prefix=f"{target.stem}.")
    try:
        load_document(path, translation.document)
    except ConfigError as exc:
        raise ConfigError(_with_origins(exc.message, translation.origins)) from None
    warnings = warnings_of(translation, strict)
    written, kept = _with_env_refs(path, translation, strict, target, warnings)
    document = {k: written[k] for k in SECTIONS if k in written}
    if output is not None:  # the schemas beside the YAML file, wherever it is run from
        document = _beside(document, {str(f): f"${{{JOB_FILE_DIR}}}/{f.name}" for f in files})
    header = [f"# Converted by gobblin-py convert from {path}", "# Relative paths are relative to the directory gobblin-py runs in;"
              f" ${{{JOB_FILE_DIR}}} is this file's directory."]
    if kept:
        header.append(f"# ${{VAR}} is read from the environment when the job runs, as Gobblin's ${{env:VAR}}: {', '.join(kept)}")
    header += [f"# warning: {w}" for w in warnings] + [f"# note: {n}" for n in translation.notes]
    text = "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if output is not None:
        from gobblin_py.durable import atomic_write, makedirs_durably

        try:
            makedirs_durably(output.parent)
            atomic_write(output, text.encode())
        except OSError as exc:
            raise ConfigError(f"--output {output}: cannot write: {exc}") from None
    return Converted(text, warnings, files)


__all__ = ["GOBBLIN_SUFFIXES", "Converted", "convert_job", "is_gobblin_job", "load_gobblin_job", "translate_file"]
