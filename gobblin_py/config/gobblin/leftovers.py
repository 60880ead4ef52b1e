"""The keys of a Gobblin job that no section read: refused, ignored with a warning, or reported unused.

Run after every section, so one validation names every unsupported class and unused key of the file."""

from __future__ import annotations

from gobblin_py.config.gobblin.draft import Props, Translation
from gobblin_py.config.gobblin.mapping import CLASSES, SUFFIXED, Role, canonical_class, rule_for

_CLASS_KEYS = {"source.class": Role.SOURCE, "converter.classes": Role.CONVERTER, "writer.builder.class": Role.WRITER,
               "data.publisher.type": Role.PUBLISHER, "fork.operator.class": Role.FORK,
               "qualitychecker.row.policies": Role.ROW_POLICY, "qualitychecker.task.policies": Role.TASK_POLICY,
               "writer.partitioner.class": Role.PARTITIONER}
"""Keys (and their branch variants `.N`) whose value names Gobblin classes."""


def _unsupported_classes(key: str, value: str, branches: int) -> list[str]:
    """What is wrong with each class a key nobody read names (a branch key of an unforked job, say): so one
    validation names every unsupported class of the file, wherever it is written."""
    base, dot, last = key.rpartition(".")
    branch_key = bool(dot) and last.isdigit() and base in _CLASS_KEYS
    role = _CLASS_KEYS.get(base if branch_key else key)
    if role is None:
        return []
    if branch_key and branches <= 1:
        read = f" (a branch key: with fork.branches unset or 1, {base} is read, not {key})"
    elif branch_key:
        read = f" (a branch key; the job has {branches} branches, numbered from 0)"
    else:
        read = ""
    out = []
    for raw in (v.strip() for v in value.split(",")):
        mapped = CLASSES.get(canonical_class(raw)) if raw else None
        if not raw or (mapped is not None and mapped.role is role and (mapped.becomes or mapped.parses)):
            continue
        why = (mapped.note if mapped is not None and mapped.role is role else
               f"it is a Gobblin {mapped.role.value}, not a {role.value}" if mapped is not None else "gobblin-py has no equivalent")
        out.append(f"unsupported Gobblin {role.value} class {raw!r}: {why}{read}")
    return out


def leftovers(props: Props, out: Translation, branches: int) -> None:
    """Keys nobody read: refused ones are errors, known ones without effect are warnings, the rest unused."""
    for key in props.settings:
        if key in props.used:
            continue
        unsupported = _unsupported_classes(key, props.settings[key].value, branches)
        if unsupported:
            out.problems += [f"{key} ({props.settings[key].origin}): {u}" for u in unsupported]
            continue
        base, dot, last = key.rpartition(".")
        if branches <= 1 and dot and last.isdigit() and base.startswith(SUFFIXED):
            out.unused.append(f"{key} ({props.settings[key].origin}): not used: a branch key; with fork.branches unset "
                              f"or 1, {base} is read, not {key}")
            continue
        if branches > 1 and key.startswith(SUFFIXED) and not key.rpartition(".")[2].isdigit():
            out.unused.append(f"{key} ({props.settings[key].origin}): not used: with fork.branches={branches} each "
                              f"branch N reads {key}.N (as in Gobblin)")
            continue
        rule = rule_for(key)
        origin = props.settings[key].origin
        if rule is not None and rule.refused:
            out.problems.append(f"{key} ({origin}): not supported: {rule.refused}")
        elif rule is not None and rule.ignored:
            out.warnings.append(f"{key} ({origin}): not applied: {rule.ignored}")
        else:
            out.unused.append(f"{key} ({origin}): not used by gobblin-py"
                              + (f" ({rule.note})" if rule is not None and rule.note else ""))
