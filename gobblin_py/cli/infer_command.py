"""`gobblin-py infer`: sample a job's input and write the Avro schema (`.avsc`) its `json_to_avro` converter needs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from gobblin_py.builtin.schemas.infer import Inferred, infer_schema
from gobblin_py.errors import ConfigError, GobblinError


def sample_records(job: Any, limit: int, datasets: list[str] | None) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Up to `limit` records of each dataset of the job's whole input (planned as a first run would: from no committed
    state), with their dataset; read by the Source's own extractors, nothing written, no lock, no Spark."""
    from gobblin_py.api import SourceState, TaskContext, flatten

    source = job.source.create()
    units = [wu for wu in flatten(source.get_workunits(SourceState({}))) if not datasets or wu.dataset in datasets]
    taken: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="gobblin-py-infer-") as staging:
        for wu in units:
            if taken.get(wu.dataset, 0) >= limit:
                continue
            context = TaskContext(job_name=job.name, run_id="infer", workunit=wu, attempt=1, staging_dir=Path(staging),
                                  reject=lambda _record, _reason, _location: None)
            extractor = source.get_extractor(wu, context)
            try:
                for record in extractor.read_records():
                    if isinstance(record, Mapping):
                        yield wu.dataset, record
                        taken[wu.dataset] = taken.get(wu.dataset, 0) + 1
                    if taken.get(wu.dataset, 0) >= limit:
                        break
            finally:
                extractor.close()


@dataclass
class JobSample:
    """What `infer` found in a job's input: the schema, the records sampled per dataset, and, when the sample came
    from several datasets, the one line saying they were merged and which fields that made nullable."""

    inferred: Inferred
    seen: dict[str, int]
    merged: str | None


def infer_job(job: Any, records: int, datasets: list[str] | None, name: str) -> JobSample:
    """One schema every sampled record of the job fits (ConfigError naming the job when the input held none); the
    datasets' samples merged, and said so, since `json_to_avro` takes one schema for all of them."""
    by_dataset: dict[str, list[Mapping[str, Any]]] = {}
    for ds, record in sample_records(job, records, datasets):
        by_dataset.setdefault(ds, []).append(record)
    inferred = infer_schema((r for rs in by_dataset.values() for r in rs), name=name)
    if not inferred.records:
        which = f" of dataset(s) {', '.join(datasets)}" if datasets else ""
        raise ConfigError(f"{job.source_file}: the input{which} held no records to infer a schema from "
                          f"(source {job.source.name}: is its path, topic or table right?)")
    seen = {ds: len(rs) for ds, rs in sorted(by_dataset.items())}
    merged = None
    if len(by_dataset) > 1:
        alone = [infer_schema(rs, name=name).schema for rs in by_dataset.values()]
        fields = [{f["name"] for f in schema["fields"]} for schema in alone]
        nullable = [set(_nullable(schema)) for schema in alone]
        made = [f for f in _nullable(inferred.schema)  # nullable only because a dataset lacks it
                if all(f not in null for has, null in zip(fields, nullable) if f in has)]
        became = (f"{len(made)} field(s) became nullable as some dataset lacks them ({', '.join(made)})" if made
                  else "no field became nullable by it")
        merged = (f"merged the samples of {len(seen)} datasets ({', '.join(seen)}) into one schema: {became}; "
                  "one dataset's alone: --dataset NAME")
    return JobSample(inferred, seen, merged)


def _nullable(schema: Mapping[str, Any]) -> list[str]:
    """The top-level fields of a record schema that may be null."""
    return [f["name"] for f in schema["fields"] if isinstance(f["type"], list) and "null" in f["type"]]


def infer_command(
    job_file: Annotated[Path, typer.Argument(help="the job file (YAML, or an Apache Gobblin .pull/.job/.properties/.conf)", show_default=False)],
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="write the schema to this .avsc file (else print it)")] = None,
    records: Annotated[int, typer.Option("--records", "-n", min=1, help="how many records to sample of each dataset")] = 1000,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="only this dataset (repeatable)")] = None,
    name: Annotated[str, typer.Option("--name", help="the record's Avro name")] = "Record",
    force: Annotated[bool, typer.Option("--force", help="overwrite --out if it exists")] = False,
) -> None:
    """Sample the job's input (files, Kafka JSON, a table) and write an Avro schema every sampled record fits: a field
    missing or null in some record is nullable, CSV text that is numbers, booleans or ISO-8601 times gets those types.
    The samples of several datasets are merged into one schema, and the command says which fields that made nullable
    (--dataset NAME infers one dataset's alone). Reads only: no lock, no Spark, no state. Check the result (a field
    always null is typed string) before using it.

    Example: gobblin-py infer jobs/example.yaml --out jobs/schemas/inferred.avsc
    """
    from gobblin_py.builtin.schemas.infer import schema_text
    from gobblin_py.cli.output import err, fail, out
    from gobblin_py.config import load_job

    try:
        if out_file is not None and out_file.exists() and not force:
            raise ConfigError(f"--out {out_file} exists; pass --force to overwrite it")
        job = load_job(job_file, writer_schema=False)  # the schema it would need is what this writes
        sample = infer_job(job, records, dataset, name)
    except GobblinError as exc:
        fail(exc)
        return
    inferred = sample.inferred
    text = schema_text(inferred.schema)
    from_where = ", ".join(f"{ds} {n}" for ds, n in sample.seen.items())
    if inferred.unnamed:
        err.print(f"left out field(s) whose name Avro cannot carry: {', '.join(inferred.unnamed)}", markup=False)
    for note in inferred.notes:
        err.print(note, markup=False)
    if sample.merged:
        err.print(sample.merged, markup=False)
    if out_file is None:
        print(text, end="")
        err.print(f"inferred from {inferred.records} records ({from_where})", markup=False)
        return
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(text)
    out.print(f"wrote {out_file}: {len(inferred.schema['fields'])} fields inferred from {inferred.records} records "
              f"({from_where}); use it with\n  converters:\n    - {{class: json_to_avro, schema: {out_file}}}", markup=False)
