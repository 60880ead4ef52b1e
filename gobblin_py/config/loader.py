"""Job file → JobSpec: YAML over the conf/ defaults, every key and plugin checked up front.

All problems of a file are collected and reported together, each as `key.path: what is expected`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gobblin_py.api.committer import PublishContext
from gobblin_py.api.quality import RowPolicyType, TaskPolicyType
from gobblin_py.api.secrets import secret_paths
from gobblin_py.api.source import Source
from gobblin_py.api.types import SchemaKind
from gobblin_py.api.writer import Delivery
from gobblin_py.config.model import (
    BadRecordPolicy,
    BranchConfig,
    CompactionSection,
    JobSection,
    JobSpec,
    LoggingSection,
    MaintenanceSection,
    PluginConfig,
    RowPolicyConfig,
    SparkSection,
    TaskPolicyConfig,
)
from gobblin_py.config.env import substitute
from gobblin_py.errors import ConfigError, PluginNotFoundError
from gobblin_py.fs import configure as configure_filesystems
from gobblin_py.fs import Location
from gobblin_py.fs.paths import JOB_DIR
from gobblin_py.plugins import BUILTINS, Kind, resolve
from gobblin_py.suggest import did_you_mean

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


class _Collector:
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
    if dot and section in known:  # `source.bootstrap_servers:` written flat
        hint = f"keys nest: write {section}: {{{rest}: ...}};"
    else:
        hint = did_you_mean(name, known)
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


def _plugin(kind: Kind, spec: Any, key: str, errors: _Collector, framework_keys: tuple[str, ...] = ()) -> tuple[PluginConfig | None, dict[str, Any]]:
    """Resolve `class:` and validate the sibling keys against the plugin's Settings."""
    if isinstance(spec, str):
        spec = {"class": spec}
    if not isinstance(spec, Mapping):
        errors.add(key, f"expected a mapping with 'class:' naming a {kind.value}")
        return None, {}
    settings = dict(spec)
    extra = {k: settings.pop(k) for k in framework_keys if k in settings}
    name = settings.pop("class", None)
    if not isinstance(name, str) or not name:
        errors.add(f"{key}.class", f"required: a built-in {kind.value} alias or package.module:ClassName")
        return None, extra
    try:
        cls = resolve(kind, name)
    except PluginNotFoundError as exc:
        errors.add(f"{key}.class", _with_suggestion(str(exc), kind, name))
        return None, extra
    model = cls.Settings
    validated = errors.model(model, settings, key)
    if validated is None:
        return None, extra
    return PluginConfig(path=f"{cls.__module__}:{cls.__qualname__}", settings=validated, key=key, name=name), extra


def _with_suggestion(message: str, kind: Kind, name: str) -> str:
    """A class that names no plugin: the built-in alias it is closest to, or the kind it is an alias of."""
    if ":" in name or "." in name:
        return message
    hint = did_you_mean(name, BUILTINS[kind])
    if not hint:
        other = next((k for k in Kind if name in BUILTINS[k]), None)
        hint = f"{name!r} is a built-in {other.value}, not a {kind.value}" if other is not None else ""
    named = f"unknown {kind.value} class {name!r}"
    if not hint or not message.startswith(named):
        return message
    return f"{named} ({hint}){message[len(named):]}"


def _plugin_list(kind: Kind, items: Any, key: str, errors: _Collector, policy_types: type | None = None) -> list[Any]:
    if items is None:
        return []
    if not isinstance(items, list):
        errors.add(key, f"expected a list of {kind.value}s")
        return []
    out: list[Any] = []
    for i, item in enumerate(items):
        item_key = f"{key}[{i}]"
        framework = ("type",) if policy_types else ()
        plugin, extra = _plugin(kind, item, item_key, errors, framework)
        if policy_types is not None:
            raw_type = extra.get("type", "FAIL")
            try:
                ptype = policy_types(str(raw_type).upper())
            except ValueError:
                allowed = " | ".join(m.value for m in policy_types)
                errors.add(f"{item_key}.type", f"expected {allowed}; got {raw_type!r}")
                continue
            if plugin is not None:
                out.append((RowPolicyConfig if policy_types is RowPolicyType else TaskPolicyConfig)(plugin, ptype))
        elif plugin is not None:
            out.append(plugin)
    return out


def _quality(section: Any, key: str, errors: _Collector) -> tuple[list[Any], list[Any], BadRecordPolicy]:
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        errors.add(key, "expected a mapping with row:, task:, bad_records: and dead_letter:")
        return [], [], BadRecordPolicy.ERR_FILE
    for unknown in sorted(set(section) - {"row", "task", "bad_records", "dead_letter"}, key=str):
        errors.unknown(key, unknown, "key", ["bad_records", "dead_letter", "row", "task"])
    rows = _plugin_list(Kind.ROW_POLICY, section.get("row"), f"{key}.row", errors, RowPolicyType)
    tasks = _plugin_list(Kind.TASK_POLICY, section.get("task"), f"{key}.task", errors, TaskPolicyType)
    raw_bad = section.get("bad_records", "ERR_FILE")
    try:
        bad = BadRecordPolicy(str(raw_bad).upper())
    except ValueError:
        errors.add(f"{key}.bad_records", f"expected ERR_FILE | FAIL; got {raw_bad!r}")
        bad = BadRecordPolicy.ERR_FILE
    return rows, tasks, bad


def _dead_letter(merged: dict[str, Any], bad_records: BadRecordPolicy, errors: _Collector) -> PluginConfig | None:
    """`quality.dead_letter`: a sink (`class: kafka` unless named) for the bad records of each committed range; the
    kafka sink's brokers are the kafka source's unless given."""
    quality = merged.get("quality")
    spec = quality.get("dead_letter") if isinstance(quality, Mapping) else None
    if spec is None:
        return None
    key = "quality.dead_letter"
    if not isinstance(spec, Mapping):
        errors.add(key, "expected a mapping such as {topic: orders.dead-letter}")
        return None
    spec = dict(spec)
    spec.setdefault("class", "kafka")
    source = merged.get("source")
    if spec["class"] == "kafka" and "bootstrap_servers" not in spec and isinstance(source, Mapping) \
            and "bootstrap_servers" in source:
        spec["bootstrap_servers"] = source["bootstrap_servers"]
    if bad_records is BadRecordPolicy.FAIL:
        errors.add(key, "bad_records FAIL stops the task at the first bad record, so none would reach the dead letters: "
                        "set bad_records: ERR_FILE, or remove dead_letter")
    plugin, _ = _plugin(Kind.DEAD_LETTER, spec, key, errors)
    return plugin


_BRANCH_KEYS = {"name", "converters", "quality", "writer", "publisher"}


def _branches(fork_extra: dict[str, Any], top: dict[str, Any], task_policies: list[Any], errors: _Collector) -> list[BranchConfig]:
    raw_branches = fork_extra.get("branches")
    if raw_branches is None:
        raw_branches = [{"name": "main"}]
    if not isinstance(raw_branches, list) or not raw_branches:
        errors.add("fork.branches", "expected a non-empty list of branches (name, converters, quality, writer, publisher)")
        return []
    out: list[BranchConfig] = []
    seen: set[str] = set()
    for i, branch in enumerate(raw_branches):
        key = f"fork.branches[{i}]"
        if not isinstance(branch, Mapping):
            errors.add(key, "expected a mapping with name: and optional converters, quality, writer, publisher")
            continue
        for unknown in sorted(set(branch) - _BRANCH_KEYS, key=str):
            errors.unknown(key, unknown, "key", sorted(_BRANCH_KEYS))
        name = branch.get("name", f"branch{i}")
        if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
            errors.add(f"{key}.name", f"expected a name of letters, digits, '-' or '_'; got {name!r}")
            continue
        if name in seen:
            errors.add(f"{key}.name", f"duplicate branch name {name!r}")
        seen.add(name)
        convs = _plugin_list(Kind.CONVERTER, branch.get("converters"), f"{key}.converters", errors)
        bq = branch.get("quality") or {}
        if not isinstance(bq, Mapping):
            errors.add(f"{key}.quality", "expected a mapping with row: and task:")
            bq = {}
        for unknown in sorted(set(bq) - {"row", "task"}, key=str):
            errors.unknown(f"{key}.quality", unknown, "key", ["row", "task"])
        rows = _plugin_list(Kind.ROW_POLICY, bq.get("row"), f"{key}.quality.row", errors, RowPolicyType)
        tasks = _plugin_list(Kind.TASK_POLICY, bq.get("task"), f"{key}.quality.task", errors, TaskPolicyType)
        wspec, wkey = (branch["writer"], f"{key}.writer") if "writer" in branch else (top.get("writer"), "writer")
        pspec, pkey = (branch["publisher"], f"{key}.publisher") if "publisher" in branch else (top.get("publisher"), "publisher")
        if wspec is None:
            errors.add(wkey, "required: a writer section with class: (for example avro)")
            continue
        w, _ = _plugin(Kind.WRITER, wspec, wkey, errors)
        p, _ = _plugin(Kind.PUBLISHER, pspec if pspec is not None else {"class": "fs"}, pkey, errors)
        if w is None or p is None:
            continue
        out.append(BranchConfig(name, tuple(convs), tuple(rows), tuple(task_policies) + tuple(tasks), w, p))
    return out


def load_yaml_job(path: Path, *, master: str | None = None, writer_schema: bool = True) -> JobSpec:
    """Read a YAML job file, merge it over the defaults and validate it; ConfigError lists every problem."""
    return load_document(path, _read_yaml(path), master=master, writer_schema=writer_schema)


def load_document(path: Path, document: dict[str, Any], *, master: str | None = None, writer_schema: bool = True) -> JobSpec:
    """Merge a job document (a YAML file's, or a translated Gobblin job's) over the defaults and validate it;
    `writer_schema=False` (for `gobblin-py infer`, which writes that schema) skips the check that the writer gets one."""
    substituted = substitute(document, os.environ)
    raw = substituted.data
    job_dir = str(path.absolute().parent)
    if job_dir not in sys.path:  # user plugins beside the job file import here as on the executors
        sys.path.insert(0, job_dir)
    defaults: dict[str, Any] = {}
    for defaults_path in defaults_files():
        defaults = deep_merge(defaults, _read_yaml(defaults_path))
    merged = deep_merge(defaults, raw)
    if master:
        merged = deep_merge(merged, {"spark": {"master": master}})
    errors = _Collector(path.name, job_dir)
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
        source, _ = _plugin(Kind.SOURCE, merged["source"], "source", errors)
    converters = _plugin_list(Kind.CONVERTER, merged.get("converters"), "converters", errors)
    rows, task_policies, bad_records = _quality(merged.get("quality"), "quality", errors)
    dead_letter = _dead_letter(merged, bad_records, errors)
    fork, fork_extra = _plugin(Kind.FORK, merged.get("fork") or {"class": "identity"}, "fork", errors, ("branches",))
    branches = _branches(fork_extra, merged, task_policies, errors)
    if source is not None and writer_schema:
        _check_schemas(source, converters, branches, errors)

    if job is not None and not errors.problems:
        branches = [_complete_publisher(b, job, spark, errors) for b in branches]
        _check_delivery(job.delivery, branches, errors)
        _check_lock(job, errors)
        if source is not None:
            _check_apart(job, source, branches, errors)
            if dead_letter is not None:
                _check_dead_letters_apart(source, dead_letter, errors)
            _check_changes_applied(source, branches, errors)
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


def _complete_publisher(branch: BranchConfig, job: JobSection, spark: SparkSection, errors: _Collector) -> BranchConfig:
    """The branch's publisher settings completed by its own `complete_settings` hook (what the job already says:
    the writer's partitioning, the work directory), its problems collected."""
    publisher, writer = branch.publisher, branch.writer
    context = PublishContext(job=job.name, work_dir=str(job.work_dir), work_store=job.work_store, spark_master=spark.master,
                             commit_on_executors_from=job.commit_on_executors_from, writer=writer.cls(),
                             writer_name=writer.name or writer.path,
                             writer_settings=writer.settings, publisher_key=publisher.key, writer_key=writer.key)
    try:
        settings, problems = publisher.cls().complete_settings(publisher.settings, context)
    except ValidationError as exc:
        problems = [(f"{publisher.key}.{'.'.join(map(str, e['loc']))}", e["msg"]) for e in exc.errors()]
        settings = publisher.settings
    problems += [(f"{publisher.key}.{path}", f"holds a secret ({why}), which would be written into every commit record; "
                  "give it to the publisher through its environment instead (an Iceberg catalog: "
                  "PYICEBERG_CATALOG__<NAME>__<KEY> with catalog: {name: <name>}; a store: its own variables, such as "
                  "AWS_ACCESS_KEY_ID)") for path, why in secret_paths(settings.model_dump(mode="json"))]
    for key, message in problems:
        errors.add(key, message)
    if problems or settings is publisher.settings:
        return branch
    return dataclasses.replace(branch, publisher=dataclasses.replace(publisher, settings=settings))


def _check_schemas(source: PluginConfig, converters: list[PluginConfig], branches: list[BranchConfig],
                   errors: _Collector) -> None:
    """Refuse a writer that needs an Avro record schema where nothing before it gives one: the job would pass
    validation and then fail every task asking for a schema."""
    top = source.cls().schema_kind(source.settings)
    for converter in converters:
        top = _after(converter, top)
    refused: set[str] = set()
    for branch in branches:
        kind = top
        for converter in branch.converters:
            kind = _after(converter, kind)
        writer = branch.writer
        if kind is not SchemaKind.NONE or not writer.cls().needs_avro_schema or writer.key in refused:
            continue
        refused.add(writer.key)
        where = f"{branch.converters[0].key.rsplit('[', 1)[0]}" if branch.converters else "converters"
        errors.add(f"{writer.key}.class", f"{writer.name or writer.path} needs an Avro record schema, and no converter "
                                          f"gives one: source {source.name or source.path} reads records without one; add "
                                          f"a json_to_avro converter naming an .avsc file to {where} (for example "
                                          "converters: [{class: json_to_avro, schema: records.avsc}]; `gobblin-py infer "
                                          "JOB --out records.avsc` writes one from a sample of the input), or write JSON "
                                          "lines (writer: {class: jsonl})")


def _after(converter: PluginConfig, kind: SchemaKind) -> SchemaKind:
    """The schema kind after `converter`, given the kind it is handed."""
    out = converter.cls().schema_kind(converter.settings)
    return kind if out is SchemaKind.KEPT else out


def _check_delivery(delivery: Delivery, branches: list[BranchConfig], errors: _Collector) -> None:
    """Refuse a job asking for exactly-once from a writer or publisher that does not support it."""
    if delivery is not Delivery.EXACTLY_ONCE:
        return
    for branch in branches:
        for plugin in (branch.writer, branch.publisher):
            cls = plugin.cls()
            if cls.guarantee is not Delivery.EXACTLY_ONCE:
                errors.add(
                    f"{plugin.key}.class",
                    f"{plugin.path} supports only {cls.guarantee.value} delivery; "
                    "set job.delivery: at_least_once or use an exactly-once plugin",
                )


def _check_lock(job: JobSection, errors: _Collector) -> None:
    """Refuse the job lock turned off under exactly-once: two overlapping runs would both read from the same
    committed watermarks and publish the same records twice."""
    if not job.lock and job.delivery is Delivery.EXACTLY_ONCE:
        errors.add("job.lock", "false: two runs of the job at once would publish the same records twice (both read from "
                               "the same committed watermarks), and job.delivery is exactly_once; remove job.lock: false (a run started while another holds the lock exits 1 and "
                               "publishes nothing), or set job.delivery: at_least_once to accept duplicates")
    if not job.lock and job.lease.url is not None:
        errors.add("job.lease.url", f"{job.lease.url}: a lease with job.lock: false is never taken, so drivers on other "
                                    "hosts would not be kept apart; remove job.lock: false or job.lease")
    if not job.lock and job.work_store is not None:
        errors.add("job.work_dir", f"{job.work_store}: a work directory on an object store is shared by drivers on any "
                                   "host, which only the job's lease keeps apart, and job.lock: false takes none; remove "
                                   "job.lock: false")
    url = job.lease.url or ""
    if "://" in url and not url.lower().startswith(("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "file://")):
        errors.add("job.lease.url", f"{url}: a lease lives on an object store that enforces conditional writes "
                                    "(s3://, gs://, az://) or in a directory every driver mounts")


def _setting_key(plugin: PluginConfig, root: str) -> str:
    """The job file key of the setting of `plugin` whose value is the directory `root` (`publisher.final_dir`)."""
    for name, value in plugin.settings:
        if isinstance(value, (str, Path)) and value and Location(str(value)) == Location(root):
            return f"{plugin.key}.{name}"
    return plugin.key


def _shown(path: str) -> str:
    """A path as given, and as it resolves when that differs (a symlink, `..`)."""
    resolved = Location(path).resolved()
    return path if resolved == str(Location(path)) else f"{path} (resolves to {resolved})"


def _check_apart(job: JobSection, source: PluginConfig, branches: list[BranchConfig], errors: _Collector) -> None:
    """Refuse an output inside the input or the input inside an output (each run would read what the last one
    published, the records doubling every run), and task output or the work directory (staging) inside the input."""
    if source.cls().input_roots is Source.input_roots:  # declares no input directory: nothing to create it for
        return
    inputs = [(_setting_key(source, root), root) for root in source.create().input_roots()]
    if not inputs:
        return
    outputs: list[tuple[str, str]] = []
    for branch in branches:
        for root in branch.publisher.create().output_roots():
            outputs.append((_setting_key(branch.publisher, root), root))
    fix = "each run would read the files it published, and publish them again; put the two directories apart"
    for in_key, in_root in inputs:
        for out_key, out_root in dict.fromkeys(outputs):
            if Location(in_root).contains(out_root):
                where = "the same directory as" if Location(out_root).contains(in_root) else "inside"
                errors.add(out_key, f"{_shown(out_root)} is {where} {in_key} {_shown(in_root)}: {fix}")
            elif Location(out_root).contains(in_root):
                errors.add(out_key, f"{_shown(out_root)} holds {in_key} {_shown(in_root)}: {fix}")
        work = [("job.work_dir", str(job.work_dir), "its staging/, task-output/ and state/")]
        if job.task_output_dir:
            work.append(("job.task_output_dir", str(job.task_output_root), "task output"))
        for key, root, what in work:
            if Location(in_root).contains(root):
                errors.add(key, f"{_shown(root)} ({what}) is inside {in_key} {_shown(in_root)}: each run would read the "
                                f"files the last one left there; put it outside the input")


def _check_changes_applied(source: PluginConfig, branches: list[BranchConfig], errors: _Collector) -> None:
    """Refuse a publisher that would apply a change source's deletes or truncates as ordinary rows (a table kept by
    key without `delete_when`): the deleted rows would stay, as rows of nulls, while every run said committed."""
    markers = source.cls().change_markers
    if not markers:
        return
    for branch in branches:
        for setting, message in branch.publisher.create().unapplied_changes(markers):
            errors.add(f"{branch.publisher.key}.{setting}", message)


def _check_dead_letters_apart(source: PluginConfig, dead_letter: PluginConfig, errors: _Collector) -> None:
    """Refuse a dead-letter topic the job's own source reads (`Source.reads_topic`, by name, so a pattern is judged for
    topics made later too): each run would read its dead letters back as bad records and send them again, one more
    copy of each per run. Whatever the brokers: two broker lists cannot be told apart as clusters here."""
    if source.cls().reads_topic is Source.reads_topic:  # reads no Kafka topic: nothing to create it for
        return
    reader = source.create()
    for topic in dead_letter.create().topics():
        key = reader.reads_topic(topic)
        if key is None:
            continue
        setting = key.removeprefix(f"{source.key}.")
        value = getattr(source.settings, setting, None)
        shown = f"{key} {value!r}" if isinstance(value, str) else key
        if setting == "topics":
            fix = f"remove it from {key}"
        else:
            escaped = topic.replace(".", "\\.")
            fix = f"exclude it ({source.key}.exclude_topics: ['{escaped}'])"
        errors.add(f"{dead_letter.key}.topic",
                   f"{topic!r} is a topic {shown} reads: each run would read its dead letters back as bad records and "
                   f"send them again (one more copy of each every run); {fix}, or name the dead-letter topic so that the "
                   "source does not read it (also when its brokers are another cluster's: the check is by name)")
