"""`state show|reset` and `history list|show`: what an operator reads and, carefully, changes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from gobblin_py.errors import ConfigError, GobblinError, StateStoreError

if TYPE_CHECKING:
    from gobblin_py.state.store import DatasetStateFile

state_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Committed watermarks and dataset states.\n\nExample: gobblin-py state show jobs/example.yaml")
history_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The last runs of a job.\n\nExample: gobblin-py history list jobs/example.yaml --limit 5")

JobFile = Annotated[Path, typer.Argument(help="the job file (YAML, or an Apache Gobblin .pull/.job/.properties/.conf)", show_default=False)]


def _fail(exc: GobblinError) -> None:
    from gobblin_py.cli.output import fail
    fail(exc)


def _json(data: Any) -> None:
    print(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def _no_state(dataset: str, names: list[str]) -> str:
    """No committed state for a dataset named on the command line: the known datasets, the closest first."""
    from gobblin_py.suggest import did_you_mean

    hint = did_you_mean(dataset, names)
    return f"no committed state for dataset {dataset!r} ({f'{hint} ' if hint else ''}known: {', '.join(names) or 'none'})"


def _store(job_file: Path) -> tuple[Any, Any]:
    from gobblin_py.config import load_job
    from gobblin_py.state.store import StateStore

    job = load_job(job_file)
    return job, StateStore(job.job.records_root, job.name)


@state_app.command("show")
def state_show(
    job_file: JobFile,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="only this dataset, with every watermark key")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show the committed watermarks and dataset states.

    Example: gobblin-py state show jobs/example.yaml --dataset orders
    """
    from gobblin_py.cli.output import err, out
    from gobblin_py.operating.committed import committed_state

    try:
        job, store = _store(job_file)
        known = store.dataset_names()
        if dataset is not None and dataset not in known:
            _fail(ConfigError(_no_state(dataset, known)))
        committed = committed_state(job, dataset)
    except GobblinError as exc:
        _fail(exc)
        return
    unreadable, view, pending = committed.unreadable, committed.view, committed.pending
    for name, error in sorted(unreadable.items()):
        err.print(f"error: {name}: unreadable: {error}", markup=False)
    for warning in committed.warnings:
        err.print(f"warning: {warning}", markup=False)
    names = sorted(view)
    if as_json:
        _json(view)
        raise typer.Exit(1 if unreadable else 0)
    lease = _lease(job)
    if lease:
        out.print(lease, markup=False)
    if not names:
        out.print("no committed state yet", markup=False)
    for d in names:
        st = view[d]["state"]
        wm = view[d]["watermarks"]
        if st or wm or d in unreadable:
            out.print(f"{d}: run {st.get('run_id', '-')} committed {st.get('committed_at', '-')}, "
                      f"{st.get('records_written', 0)} records written, {len(wm)} watermark keys", markup=False)
        else:
            out.print(f"{d}: no committed state", markup=False)
        _print_marks(wm, d, dataset is not None, "    ")
        table = view[d].get("table")
        if table is not None:
            same = "(as in the state store)" if table["matches_state"] else "(differ from the state store's, below)"
            out.print(f"    table {table['table']}: run {table['run_id']}, snapshot {table['snapshot_id']} at "
                      f"{table['committed_at']}, committed {len(table['watermarks'])} watermark keys {same}", markup=False)
            if not table["matches_state"]:
                _print_marks(table["watermarks"], d, dataset is not None, "        ")
                then = ("a pending commit sets them on the next run (see inspect-commits)" if d in pending else
                        "no commit is pending: the next run extracts from the state store's watermarks")
                out.print(f"    the table's watermarks differ from the state store's ({len(wm) or 'none'}"
                          f"{' keys' if wm else ''}): {then}", markup=False)
    if unreadable:
        raise typer.Exit(1)


def _lease(job: Any) -> str:
    """`lease: epoch N, run … (pid … on host …), held/released/expired` for a job whose lease was ever taken."""
    from gobblin_py.operating.overview import lease_of

    try:
        record = lease_of(job)
    except GobblinError as exc:
        return f"lease: unreadable: {exc}"
    return f"lease: {record.describe()}" if record is not None else ""


def _print_marks(wm: dict[str, Any], dataset: str, every: bool, indent: str) -> None:
    """A dataset's watermark keys, the first 8 unless `every`."""
    from gobblin_py.cli.output import out

    shown = sorted(wm.items()) if every or len(wm) <= 8 else sorted(wm.items())[:8]
    for key, value in shown:
        out.print(f"{indent}{key} = {value}", markup=False)
    if len(shown) < len(wm):
        out.print(f"{indent}… {len(wm) - len(shown)} more (--dataset {dataset} shows all)", markup=False)


def _mark(value: Any, missing: str) -> str:
    """A watermark as an operator reads it: `start` for none yet (a first extraction), `-` for not reached."""
    return missing if value is None else str(value)


def _parse_value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


@state_app.command("reset")
def state_reset(
    job_file: JobFile,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="the dataset URN (with --import-offsets: only this topic)", show_default=False)] = None,
    to: Annotated[list[str] | None, typer.Option("--to", help="KEY=VALUE to set (repeatable); without it every watermark of the dataset is dropped")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    new: Annotated[bool, typer.Option("--new", help="the dataset has no committed state yet: create its watermarks (e.g. a start offset)")] = False,
    import_offsets: Annotated[Path | None, typer.Option("--import-offsets", help="a Kafka job: set the offsets of a file of topic,partition,offset lines (the next offset to read, e.g. a Gobblin job's watermarks)", show_default=False)] = None,
) -> None:
    """Move a dataset's watermarks on purpose (refused while a commit is pending for it); takes the job lock.

    Without --to the dataset's watermarks are dropped and the next run starts it over. A dataset with no
    committed state is refused (a typo would create state nobody reads) unless --new. An unreadable
    watermark file is replaced by what --to gives. --import-offsets sets every topic the file names (a Kafka
    job moving from Gobblin: pass --new for topics gobblin-py has not committed yet).

    Example: gobblin-py state reset jobs/kafka-to-avro.yaml --dataset events --to 0=1500 --to 1=1200
    """
    from gobblin_py.cli.output import err, out
    from gobblin_py.commit.guard import JobGuard
    from gobblin_py.commit.store import CommitStepStore
    from gobblin_py.runtime.runner import new_run_id
    from gobblin_py.state.events import EventLog
    from gobblin_py.state.store import DatasetStateFile, WatermarkFile

    try:
        job, store = _store(job_file)
        plan = _reset_plan(job, dataset, to or [], import_offsets)
        with JobGuard(job, new_run_id()):
            steps = []
            for name, changes in plan.items():
                if CommitStepStore(job.job.records_root).exists(job.name, name):
                    err.print(f"error: a commit sequence is pending for dataset {name!r}; finish it first with "
                              f"`gobblin-py recover {job_file} --dataset {name}` (see inspect-commits)", markup=False)
                    raise typer.Exit(1)
                wm = WatermarkFile(store.dir, name)
                known = wm.exists() or DatasetStateFile(store.dir, name).exists()
                if not known and not new:
                    names = store.dataset_names()
                    raise ConfigError(f"{_no_state(name, names)}; "
                                      "pass --new to create watermarks for a dataset that has never been committed")
                if new and not changes:
                    raise ConfigError("--new needs at least one --to KEY=VALUE")
                try:
                    before = wm.read()
                except StateStoreError as exc:
                    err.print(f"warning: {exc}; it is replaced by the --to values", markup=False)
                    if not changes:
                        out.print("(no --to: the unreadable file is replaced by an empty one and the dataset starts "
                                  "over)", markup=False)
                    before = {}
                after = {**before, **changes} if changes else {}
                out.print(f"dataset {name}: watermarks {len(before)} keys → {len(after)} keys", markup=False)
                for key in sorted(set(before) | set(after)):
                    if before.get(key) != after.get(key):
                        out.print(f"    {key}: {before.get(key, '-')} → {after.get(key, '-')}", markup=False)
                kept = _recorded_identities(DatasetStateFile(store.dir, name))
                if kept:
                    out.print(f"    the identities recorded with them are dropped ({kept}): the next run checks "
                              "against the source as it is now and records its current ones", markup=False)
                steps.append((name, wm, before, after))
            if not yes:
                if not sys.stdin.isatty():
                    err.print("nothing changed: no terminal to confirm on; pass --yes", markup=False)
                    raise typer.Exit(1)
                if not typer.confirm("Apply?", default=False):
                    err.print("nothing changed", markup=False)
                    raise typer.Exit(1)
            for name, wm, before, after in steps:
                wm.write(after)  # also when empty: a dataset with no watermark file is resumed from its table
                _drop_recorded_identities(DatasetStateFile(store.dir, name))
                EventLog(job.job.records_root, job.name).emit("WatermarkReset", dataset=name, before=before, after=after)
                out.print(f"dataset {name}: watermarks reset", markup=False)
    except GobblinError as exc:
        _fail(exc)


def _recorded_identities(file: DatasetStateFile) -> str:
    """What a reset drops besides the watermarks: the identities the Source recorded with them (a Kafka topic's ids),
    which describe the positions being replaced; "" when there are none."""
    try:
        state = file.read()
    except StateStoreError:
        return "an unreadable dataset state file"
    kept = (state or {}).get("source")
    if not isinstance(kept, dict) or not kept:
        return ""
    return ", ".join(key.replace("_", " ") for key in sorted(kept))


def _drop_recorded_identities(file: DatasetStateFile) -> None:
    """The dataset state minus what the Source recorded with the old positions (an unreadable file removed)."""
    try:
        state = file.read()
    except StateStoreError:
        file.remove()
        return
    if state and (state.get("source") or state.get("pinned")):  # and what table publishers pinned (`GlobalCommitter.pin`)
        file.write({k: v for k, v in state.items() if k not in ("source", "pinned")})


def _reset_plan(job: Any, dataset: str | None, to: list[str], import_offsets: Path | None) -> dict[str, dict[str, Any]]:
    """dataset → the watermark keys to set: from --to for --dataset, or from an offsets file for a Kafka job."""
    if import_offsets is None:
        if dataset is None:
            raise ConfigError("name the dataset with --dataset URN (or give a Kafka job --import-offsets FILE)")
        changes: dict[str, Any] = {}
        for item in to:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"--to {item!r}: expected KEY=VALUE, for example 0=1500")
            changes[key] = _parse_value(value)
        return {dataset: changes}
    from gobblin_py.builtin.sources.kafka.source import KafkaSource
    from gobblin_py.config.gobblin.offsets import read_offsets

    if to:
        raise ConfigError("give either --to or --import-offsets, not both")
    if not issubclass(job.source.cls(), KafkaSource):
        raise ConfigError(f"--import-offsets sets Kafka offsets, and job {job.name!r} reads from {job.source.name!r}, not kafka")
    offsets: dict[str, dict[str, Any]] = dict(read_offsets(import_offsets))
    if dataset is not None:
        if dataset not in offsets:
            raise ConfigError(f"{import_offsets} has no offsets of topic {dataset!r} (it has: {', '.join(sorted(offsets))})")
        return {dataset: offsets[dataset]}
    return offsets


def _run_line(run: dict[str, Any]) -> str:
    written = sum(d.get("records_written", 0) for d in run.get("datasets", []))
    per = ", ".join(f"{d['dataset']} {d.get('records_written', 0)}" for d in run.get("datasets", []) if d.get("records_written"))
    return (f"{run['run_id']}  {run['started']}  {run['duration_s']:>8.1f}s  {run['status']:<9}  "
            f"{written} records{f' ({per})' if per else ''}")


@history_app.command("list")
def history_list(
    job_file: JobFile,
    limit: Annotated[int, typer.Option("--limit", "-n", help="how many runs, newest first")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """The last runs: start, duration, status and records written per dataset, newest first.

    Example: gobblin-py history list jobs/example.yaml --limit 5
    """
    from gobblin_py.cli.output import out
    from gobblin_py.config import load_job
    from gobblin_py.operating.overview import run_history

    try:
        runs = run_history(load_job(job_file), limit)
    except GobblinError as exc:
        _fail(exc)
        return
    if as_json:
        _json(runs)
        return
    if not runs:
        out.print("no runs yet", markup=False)
    for run in runs:
        out.print(_run_line(run), markup=False)
        if run.get("error"):
            out.print(f"    {run['error']}", markup=False)


@history_app.command("show")
def history_show(
    job_file: JobFile,
    run_id: Annotated[str, typer.Argument(help="a run id from `history list`", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """One run with its datasets and tasks.

    Example: gobblin-py history show jobs/example.yaml 20261121T183541479601Z-e04fbd
    """
    from gobblin_py.cli.output import out
    from gobblin_py.config import load_job
    from gobblin_py.operating.overview import find_run

    try:
        run = find_run(load_job(job_file), run_id)
    except GobblinError as exc:
        _fail(exc)
        return
    if as_json:
        _json(run)
        return
    out.print(_run_line(run), markup=False)
    out.print(f"  phases: {', '.join(f'{k} {v:.2f}s' for k, v in run.get('phases', {}).items())}", markup=False)
    if run.get("checkpoints_total"):
        from gobblin_py.cli.progress import checkpoint_line

        rows = run["checkpoints"]
        out.print(f"  continuous: {run['checkpoints_total']} checkpoints (the last {min(len(rows), 10)} below; --json has "
                  f"{len(rows)}); tasks are the last checkpoint's", markup=False)
        for row in rows[-10:]:
            out.print(f"  {checkpoint_line(row)}", markup=False)
    for d in run.get("datasets", []):
        out.print(f"  dataset {d['dataset']}: {d['status']}, {d['records_written']} written, {d['records_rejected']} rejected, "
                  f"{d['files_published']} files, watermark {d['watermark']}", markup=False)
    tasks = run.get("tasks", [])
    if run.get("tasks_total", len(tasks)) > len(tasks):
        out.print(f"  tasks: {run['tasks_total']}, the detail of {len(tasks)} kept (every failed task, every task with "
                  "rejected records, then the slowest)", markup=False)
    for t in tasks:
        more = f" and {t['packed_keys'] - 1} more file(s)" if t.get("packed_keys") else ""
        out.print(f"  task {t['workunit']} [{t['watermark_key']}{more}: {_mark(t['low_watermark'], 'start')} → {_mark(t['actual_high_watermark'], '-')}] "
                  f"{t['status']} after {t['attempts']} attempt(s), {t['records_extracted']} extracted, "
                  f"{t['records_written']} written, {t['duration_s']}s" + (f": {t['error']}" if t.get("error") else ""), markup=False)
