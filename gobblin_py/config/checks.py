"""What no one section can refuse alone, checked across the validated job before anything runs: a writer without the
schema it needs, a delivery a plugin cannot give, the lock off, an output inside the input, dead letters read back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import ValidationError

from gobblin_py.api.committer import PublishContext
from gobblin_py.api.secrets import secret_paths
from gobblin_py.api.source import Source
from gobblin_py.api.types import SchemaKind
from gobblin_py.api.writer import Delivery
from gobblin_py.config.model import BranchConfig, JobSection, PluginConfig, SparkSection
from gobblin_py.config.problems import Collector
from gobblin_py.fs import Location


def complete_publisher(branch: BranchConfig, job: JobSection, spark: SparkSection, errors: Collector) -> BranchConfig:
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


def check_schemas(source: PluginConfig, converters: list[PluginConfig], branches: list[BranchConfig],
                  errors: Collector) -> None:
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


def check_delivery(delivery: Delivery, branches: list[BranchConfig], errors: Collector) -> None:
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


def check_lock(job: JobSection, errors: Collector) -> None:
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


def check_apart(job: JobSection, source: PluginConfig, branches: list[BranchConfig], errors: Collector) -> None:
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


def fit_source(source: PluginConfig, branches: list[BranchConfig], errors: Collector) -> PluginConfig:
    """The source's settings as the job's publishers need them (`Source.fit_to_publishers`), its problems collected."""
    by_name = any(b.publisher.cls().knows_outputs_by_name for b in branches)
    settings, problems = source.cls().fit_to_publishers(source.settings, by_name)
    for key, message in problems:
        errors.add(f"{source.key}.{key}", message)
    return source if settings is source.settings else dataclasses.replace(source, settings=settings)


def check_changes_applied(source: PluginConfig, branches: list[BranchConfig], errors: Collector) -> None:
    """Refuse a publisher that would apply a change source's deletes or truncates as ordinary rows (a table kept by
    key without `delete_when`): the deleted rows would stay, as rows of nulls, while every run said committed."""
    markers = source.cls().change_markers
    if not markers:
        return
    for branch in branches:
        for setting, message in branch.publisher.create().unapplied_changes(markers):
            errors.add(f"{branch.publisher.key}.{setting}", message)


def check_dead_letters_apart(source: PluginConfig, dead_letter: PluginConfig, errors: Collector) -> None:
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
