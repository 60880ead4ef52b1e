"""Job file → JobSpec: YAML over the conf/ defaults, every key and plugin checked up front.

All problems of a file are collected and reported together, each as `key.path: what is expected`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gobblin_py.config.checks import (
    check_apart,
    check_changes_applied,
    check_dead_letters_apart,
    check_delivery,
    check_lock,
    check_schemas,
    complete_publisher,
    fit_source,
)
from gobblin_py.config.env import substitute
from gobblin_py.config.model import (
    CompactionSection,
    JobSection,
    JobSpec,
    LoggingSection,
    MaintenanceSection,
    SparkSection,
)
from gobblin_py.config.plugin_sections import (
    dead_letter_sink,
    fork_branches,
    plugin_config,
    plugin_list,
    quality_policies,
)
from gobblin_py.config.problems import Collector
from gobblin_py.errors import ConfigError
from gobblin_py.fs import configure as configure_filesystems
from gobblin_py.plugins import Kind

SECTIONS = ("job", "source", "converters", "quality", "fork", "writer", "publisher", "spark", "logging", "compaction", "maintenance")
_DEFAULTS_ENV = "GOBBLIN_PY_DEFAULTS"
PACKAGE_CONF = Path(__file__).resolve().parents[1] / "conf"
"""Settings that ship inside the package: the job defaults and Spark's logging configuration."""


def defaults_files() -> list[Path]:
    """What every job inherits, in order of precedence (later wins): the package's own
    `gobblin_py/conf/defaults.yaml` (package data, so a wheel installed anywhere runs a job as the checkout
    does), then a site file named by `$GOBBLIN_PY_DEFAULTS` (an operator's defaults for all their jobs)."""
    env = os.environ.get(_DEFAULTS_ENV)
    return [PACKAGE_CONF / "defaults.yaml", *([Path(env)] if env else [])]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` over `base`: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: job file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read job file: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{path}: not a job file: its YAML is nested too deep to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job file must be a mapping of sections ({', '.join(SECTIONS)})")
    return data


JOB_FILE_DIR = "JOB_FILE_DIR"
"""`${JOB_FILE_DIR}` in a job file is the directory the job file is in: a path beside it that holds wherever the job
runs from (other relative paths are relative to the working directory)."""


def load_yaml_job(path: Path, *, master: str | None = None, writer_schema: bool = True) -> JobSpec:
    """Read a YAML job file, merge it over the defaults and validate it; ConfigError lists every problem."""
    return load_document(path, _read_yaml(path), master=master, writer_schema=writer_schema)


def load_document(path: Path, document: dict[str, Any], *, master: str | None = None, writer_schema: bool = True) -> JobSpec:
    """Merge a job document (a YAML file's, or a translated Gobblin job's) over the defaults and validate it;
    `writer_schema=False` (for `gobblin-py infer`, which writes that schema) skips the check that the writer gets one."""
    job_dir = str(path.absolute().parent)
    substituted = substitute(document, {**os.environ, JOB_FILE_DIR: job_dir})  # the job file's own directory wins
    raw = substituted.data
    if job_dir not in sys.path:  # user plugins beside the job file import here as on the executors
        sys.path.insert(0, job_dir)
    defaults: dict[str, Any] = {}
    for defaults_path in defaults_files():
        defaults = deep_merge(defaults, _read_yaml(defaults_path))
    merged = deep_merge(defaults, raw)
    if master:
        merged = deep_merge(merged, {"spark": {"master": master}})
    errors = Collector(path.name, job_dir)
    for key, problem in substituted.problems:
        errors.add(key, problem)
    for unknown in sorted(set(raw) - set(SECTIONS), key=str):
        errors.unknown("", unknown, "section", list(SECTIONS))

    job = errors.model(JobSection, merged.get("job"), "job")
    spark = errors.model(SparkSection, merged.get("spark"), "spark")
    logging_ = errors.model(LoggingSection, merged.get("logging"), "logging")
    compaction = errors.model(CompactionSection, merged.get("compaction"), "compaction")
    maintenance = errors.model(MaintenanceSection, merged.get("maintenance"), "maintenance")
    if "source" not in raw:
        errors.add("source", "required section is missing (for example: source: {class: files, path: jobs/data})")
        source = None
    else:
        source, _ = plugin_config(Kind.SOURCE, merged["source"], "source", errors)
    converters = plugin_list(Kind.CONVERTER, merged.get("converters"), "converters", errors)
    rows, task_policies, bad_records = quality_policies(merged.get("quality"), "quality", errors)
    dead_letter = dead_letter_sink(merged, bad_records, errors)
    fork, fork_extra = plugin_config(Kind.FORK, merged.get("fork") or {"class": "identity"}, "fork", errors, ("branches",))
    branches = fork_branches(fork_extra, merged, task_policies, errors)
    if source is not None and writer_schema:
        check_schemas(source, converters, branches, errors)

    if job is not None and not errors.problems:
        branches = [complete_publisher(b, job, spark, errors) for b in branches]
        check_delivery(job.delivery, branches, errors)
        check_lock(job, errors)
        if source is not None:
            source = fit_source(source, branches, errors)
            check_apart(job, source, branches, errors)
            if dead_letter is not None:
                check_dead_letters_apart(source, dead_letter, errors)
            check_changes_applied(source, branches, errors)
    if errors.problems or None in (job, spark, logging_, source, fork, compaction, maintenance):
        listed = "\n".join(f"  {substituted.redact(p)}" for p in errors.problems)
        raise ConfigError(f"{path}: invalid job file ({len(errors.problems)} problem{'s' if len(errors.problems) != 1 else ''}):\n{listed}")
    configure_filesystems(job.filesystems)
    return JobSpec(
        source_file=str(path.absolute()),
        job=job,
        source=source,
        converters=tuple(converters),
        row_policies=tuple(rows),
        bad_records=bad_records,
        fork=fork,
        branches=tuple(branches),
        spark=spark,
        logging=logging_,
        compaction=compaction,
        maintenance=maintenance,
        dead_letter=dead_letter,
        raw=merged,
    )
