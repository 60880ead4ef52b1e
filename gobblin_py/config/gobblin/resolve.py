"""A Gobblin job file → its flat, resolved settings, the way Gobblin assembles them.

In order of precedence (later wins): the template named by `job.template`, the `.properties` files of the job's
directory and of each directory above it up to `$GOBBLIN_JOB_CONFIG_DIR` (Gobblin's `jobconf.dir`; the closest
directory wins), then the job file itself. `include=FILE` inserts a file's keys where the line stands; `${key}` and
`${env:VAR}` are replaced. Every setting remembers where it was written, for messages.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gobblin_py.config.gobblin.properties import Entry, parse_properties, read_text
from gobblin_py.errors import ConfigError

HOCON_SUFFIXES = (".conf", ".hocon")
PROPERTIES_SUFFIXES = (".pull", ".job", ".properties")
JOBCONF_DIR_ENV = "GOBBLIN_JOB_CONFIG_DIR"
TEMPLATE_KEY = "job.template"
REQUIRED_KEY = "gobblin.template.required_attributes"
_VAR = re.compile(r"\$\{([^}]*)\}")
ENV_REF = "\ue000{}\ue001"
"""What `${env:VAR}` becomes when references are kept (for `convert`): private-use marks around the name, which no
job file holds, so the YAML written can say `${VAR}` where the Gobblin file said `${env:VAR}`."""


@dataclass
class Setting:
    """One resolved value and where it was written; `problem` when `${…}` could not be resolved."""

    value: str
    origin: str
    problem: str | None = None


@dataclass
class Resolved:
    settings: dict[str, Setting]
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    file: Path | None = None  # the job file, whose name names a job that sets no job.name


def resolve_job(path: Path, env: Mapping[str, str] | None = None, keep_env_refs: bool = False) -> Resolved:
    """Read a `.pull`/`.job`/`.properties`/`.conf` job with its defaults, template and includes, interpolated;
    with `keep_env_refs` a set `${env:VAR}` becomes `ENV_REF` of its name instead of its value."""
    env = os.environ if env is None else env
    warnings: list[str] = []
    problems: list[str] = []
    defaults: dict[str, Setting] = {}
    for defaults_file in parent_defaults(path, env):
        defaults.update(_read(defaults_file, warnings))
    own = _read(path, warnings)
    merged = {**defaults, **own}
    template = merged.get(TEMPLATE_KEY)
    if template is not None:
        template_file = _template_path(path, _interpolated(TEMPLATE_KEY, merged, env), env)
        from_template = _read(template_file, warnings)
        merged = {**from_template, **merged}
        required = merged.get(REQUIRED_KEY)
        missing = [a for a in (required.value.split(",") if required else []) if a.strip() and a.strip() not in {**defaults, **own}]
        if missing:
            problems.append(f"{TEMPLATE_KEY} ({template.origin}): the template {shown(template_file)} requires "
                            f"{', '.join(m.strip() for m in missing)}, which the job file does not set")
    _interpolate_all(merged, env, keep_env_refs)
    return Resolved(merged, warnings, problems, path)


def parent_defaults(path: Path, env: Mapping[str, str]) -> list[Path]:
    """The `.properties` files whose keys a job inherits, farthest directory first (Gobblin's jobconf.dir)."""
    job_dir = path.absolute().parent
    dirs = [job_dir]
    root = env.get(JOBCONF_DIR_ENV)
    if root:
        root_dir = Path(root).absolute()
        if root_dir in job_dir.parents:
            dirs = [d for d in reversed(job_dir.parents) if d == root_dir or root_dir in d.parents] + [job_dir]
    own = path.absolute()
    return [f for d in dirs for f in sorted(d.glob("*.properties")) if f.is_file() and f != own]


def shown(path: Path) -> str:
    """A path as messages show it: relative to the working directory when under it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path.absolute())


def _read(path: Path, warnings: list[str], including: tuple[Path, ...] = ()) -> dict[str, Setting]:
    """A file's settings in order, includes expanded where they stand (a later key wins)."""
    path = path.absolute()
    if path in including:
        chain = " → ".join(shown(p) for p in (*including, path))
        raise ConfigError(f"{shown(including[-1])}: include cycle: {chain}")
    if path.suffix in HOCON_SUFFIXES:
        return _read_hocon(path)
    parsed = parse_properties(read_text(path), shown(path))
    warnings.extend(parsed.warnings)
    out: dict[str, Setting] = {}
    for entry in parsed.entries:
        if entry.key == "include":
            for name in (n.strip() for n in entry.value.split(",")):
                if name:
                    target = _included(path, name, entry)
                    out.update(_read(target, warnings, (*including, path)))
            continue
        if entry.key in out and out[entry.key].value != entry.value:
            warnings.append(f"{entry.origin}: {entry.key} is set again (first at {out[entry.key].origin}); the later value wins")
        out.pop(entry.key, None)
        out[entry.key] = Setting(entry.value, entry.origin)
    return out


def _included(path: Path, name: str, entry: Entry) -> Path:
    target = Path(name) if Path(name).is_absolute() else path.parent / name
    if not target.is_file():
        raise ConfigError(f"{entry.origin}: include={name}: file not found ({shown(target)})")
    return target


def _read_hocon(path: Path) -> dict[str, Setting]:
    """A HOCON file (includes and substitutions resolved by pyhocon, as Typesafe Config does) as flat keys."""
    from pyhocon import ConfigFactory

    try:
        tree = ConfigFactory.parse_file(str(path), resolve=True)
    except FileNotFoundError:
        raise ConfigError(f"{shown(path)}: file not found") from None
    except Exception as exc:  # noqa: BLE001 - pyhocon raises pyparsing and its own errors alike: one message
        raise ConfigError(f"{shown(path)}: not valid HOCON: {exc}") from None
    return {key: Setting(value, shown(path)) for key, value in _flatten(tree, "")}


def _flatten(tree: Mapping[str, Any], prefix: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for raw_key, value in tree.items():
        key = f"{prefix}{str(raw_key).strip(chr(34))}"
        if isinstance(value, Mapping):
            out.extend(_flatten(value, key + "."))
        else:
            out.append((key, _text(value)))
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        return json.dumps(value)  # a JSON schema written bare (`schema=[{"columnName": …}]`): the JSON it is
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    return "" if value is None else str(value)


def _template_path(job: Path, value: str, env: Mapping[str, str]) -> Path:
    """`job.template`: a path relative to the job file, `file:///abs`, or `resource:///rel` looked for beside the
    job and in the jobconf directory (gobblin-py has no classpath)."""
    rel = value.strip()
    for scheme in ("resource://", "file://"):
        if rel.startswith(scheme):
            rel = rel[len(scheme):]
            if scheme == "resource://":
                rel = rel.lstrip("/")
            break
    candidates = [Path(rel)] if Path(rel).is_absolute() else [job.absolute().parent / rel]
    if not Path(rel).is_absolute() and env.get(JOBCONF_DIR_ENV):
        candidates.append(Path(env[JOBCONF_DIR_ENV]).absolute() / rel)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ConfigError(f"{job}: {TEMPLATE_KEY}={value}: template not found (looked for {', '.join(map(str, candidates))})")


def _interpolated(key: str, settings: dict[str, Setting], env: Mapping[str, str]) -> str:
    _interpolate_one(key, settings, env, ())
    setting = settings[key]
    if setting.problem:
        raise ConfigError(f"{key} ({setting.origin}): {setting.problem}")
    return setting.value


def _interpolate_all(settings: dict[str, Setting], env: Mapping[str, str], keep_env_refs: bool = False) -> None:
    for key in list(settings):
        _interpolate_one(key, settings, env, (), keep_env_refs)


def _interpolate_one(key: str, settings: dict[str, Setting], env: Mapping[str, str], stack: tuple[str, ...],
                     keep_env_refs: bool = False) -> None:
    """Replace `${name}` (another key) and `${env:VAR}` in one value; what cannot be replaced is its `problem`."""
    setting = settings[key]
    if "${" not in setting.value or setting.problem:
        return

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("env:"):
            var = name[4:]
            if var in env:
                return ENV_REF.format(var) if keep_env_refs else env[var]
            raise _Unresolved(f"environment variable {var} is not set (named by ${{{name}}})")
        if name in stack or name == key:
            raise _Unresolved(f"${{{name}}} refers back to itself ({' → '.join((*stack, key, name))})")
        if name not in settings:
            raise _Unresolved(f"${{{name}}} names no key of the job (write ${{env:{name}}} for an environment variable)")
        _interpolate_one(name, settings, env, (*stack, key), keep_env_refs)
        if settings[name].problem:
            raise _Unresolved(f"${{{name}}}: {settings[name].problem}")
        return settings[name].value

    try:
        settings[key] = Setting(_VAR.sub(replace, setting.value), setting.origin)
    except _Unresolved as exc:
        settings[key] = Setting(setting.value, setting.origin, str(exc))


class _Unresolved(Exception):
    pass
