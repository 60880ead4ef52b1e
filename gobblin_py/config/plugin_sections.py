"""The job file's plugin sections (source, converters, quality, fork and its branches, writer, publisher, dead letters)
→ PluginConfigs: each `class:` resolved to a plugin, its sibling keys validated against the plugin's Settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gobblin_py.api.quality import RowPolicyType, TaskPolicyType
from gobblin_py.config.model import BadRecordPolicy, BranchConfig, PluginConfig, RowPolicyConfig, TaskPolicyConfig
from gobblin_py.config.problems import Collector
from gobblin_py.errors import PluginNotFoundError
from gobblin_py.plugins import BUILTINS, Kind, resolve
from gobblin_py.suggest import did_you_mean


def plugin_config(kind: Kind, spec: Any, key: str, errors: Collector, framework_keys: tuple[str, ...] = ()) -> tuple[PluginConfig | None, dict[str, Any]]:
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


def plugin_list(kind: Kind, items: Any, key: str, errors: Collector, policy_types: type | None = None) -> list[Any]:
    """A list of plugins: converters, or row or task policies with their `type:` (`policy_types`: its enum)."""
    if items is None:
        return []
    if not isinstance(items, list):
        errors.add(key, f"expected a list of {kind.value}s")
        return []
    out: list[Any] = []
    for i, item in enumerate(items):
        item_key = f"{key}[{i}]"
        framework = ("type",) if policy_types else ()
        plugin, extra = plugin_config(kind, item, item_key, errors, framework)
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


def quality_policies(section: Any, key: str, errors: Collector) -> tuple[list[Any], list[Any], BadRecordPolicy]:
    """`quality:`: its row policies, task policies and what a bad record does."""
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        errors.add(key, "expected a mapping with row:, task:, bad_records: and dead_letter:")
        return [], [], BadRecordPolicy.ERR_FILE
    for unknown in sorted(set(section) - {"row", "task", "bad_records", "dead_letter"}, key=str):
        errors.unknown(key, unknown, "key", ["bad_records", "dead_letter", "row", "task"])
    rows = plugin_list(Kind.ROW_POLICY, section.get("row"), f"{key}.row", errors, RowPolicyType)
    tasks = plugin_list(Kind.TASK_POLICY, section.get("task"), f"{key}.task", errors, TaskPolicyType)
    raw_bad = section.get("bad_records", "ERR_FILE")
    try:
        bad = BadRecordPolicy(str(raw_bad).upper())
    except ValueError:
        errors.add(f"{key}.bad_records", f"expected ERR_FILE | FAIL; got {raw_bad!r}")
        bad = BadRecordPolicy.ERR_FILE
    return rows, tasks, bad


def dead_letter_sink(merged: dict[str, Any], bad_records: BadRecordPolicy, errors: Collector) -> PluginConfig | None:
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
    plugin, _ = plugin_config(Kind.DEAD_LETTER, spec, key, errors)
    return plugin


_BRANCH_KEYS = {"name", "converters", "quality", "writer", "publisher"}


def fork_branches(fork_extra: dict[str, Any], top: dict[str, Any], task_policies: list[Any], errors: Collector) -> list[BranchConfig]:
    """`fork.branches`, each with converters, quality, writer and publisher (the top-level ones where it names none)."""
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
        convs = plugin_list(Kind.CONVERTER, branch.get("converters"), f"{key}.converters", errors)
        bq = branch.get("quality") or {}
        if not isinstance(bq, Mapping):
            errors.add(f"{key}.quality", "expected a mapping with row: and task:")
            bq = {}
        for unknown in sorted(set(bq) - {"row", "task"}, key=str):
            errors.unknown(f"{key}.quality", unknown, "key", ["row", "task"])
        rows = plugin_list(Kind.ROW_POLICY, bq.get("row"), f"{key}.quality.row", errors, RowPolicyType)
        tasks = plugin_list(Kind.TASK_POLICY, bq.get("task"), f"{key}.quality.task", errors, TaskPolicyType)
        wspec, wkey = (branch["writer"], f"{key}.writer") if "writer" in branch else (top.get("writer"), "writer")
        pspec, pkey = (branch["publisher"], f"{key}.publisher") if "publisher" in branch else (top.get("publisher"), "publisher")
        if wspec is None:
            errors.add(wkey, "required: a writer section with class: (for example avro)")
            continue
        w, _ = plugin_config(Kind.WRITER, wspec, wkey, errors)
        p, _ = plugin_config(Kind.PUBLISHER, pspec if pspec is not None else {"class": "fs"}, pkey, errors)
        if w is None or p is None:
            continue
        out.append(BranchConfig(name, tuple(convs), tuple(rows), tuple(task_policies) + tuple(tasks), w, p))
    return out
