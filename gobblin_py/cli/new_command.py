"""`gobblin-py new`: a first job of one's own, with its own name and work directory, its schema inferred, validated."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gobblin_py.errors import ConfigError, GobblinError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_NOT_READ_BY_NEW = ("postgresql", "postgres", "mysql", "mariadb", "jdbc")


def source_section(source: str, name: str, brokers: str) -> dict[str, Any]:
    """The `source:` section reading `source`: a local directory or file, a URL (s3://…, kafka://host:port/topic), or
    a Kafka topic's name on `brokers`; ConfigError naming what it could not tell."""
    scheme, sep, rest = source.partition("://")
    if sep and scheme == "kafka":
        servers, _, topic = rest.partition("/")
        if not servers or not topic:
            raise ConfigError(f"--from {source}: a Kafka URL is kafka://HOST:PORT/TOPIC")
        return {"class": "kafka", "bootstrap_servers": servers, "topics": [topic], "bootstrap_with_offset": "earliest",
                "deserializer": "json"}
    if sep and scheme.split("+")[0] in _NOT_READ_BY_NEW:
        raise ConfigError(f"--from {source}: `new` writes jobs over files and Kafka topics; a database table's source "
                          "section (its connection, table and watermark column) is shown in docs/sources/jdbc.md")
    if sep:
        return {"class": "files", "path": source}  # s3://bucket/in and the like: the filesystem layer says if it cannot
    path = Path(source)
    if path.is_dir():
        return {"class": "files", "path": source}
    if path.is_file():  # one file: its directory, only that file, as one dataset named after the job
        return {"class": "files", "path": str(path.parent), "include": [path.name], "root_dataset": name}
    if "/" in source or "." in source or path.exists():
        raise ConfigError(f"--from {source}: no such file or directory (a Kafka topic: kafka://HOST:PORT/TOPIC, "
                          "or its bare name with --brokers)")
    return {"class": "kafka", "bootstrap_servers": brokers, "topics": [source], "bootstrap_with_offset": "earliest",
            "deserializer": "json"}


def _apart_from_input(source: str) -> None:
    """ConfigError when the input's local directory holds the current one, where the job keeps ./work and ./output
    (a run would read what it wrote): a file next to where `new` runs, most often. Names the fix."""
    if "://" in source or not Path(source).exists():
        return
    path = Path(source)
    folder = (path if path.is_dir() else path.parent).resolve()
    here = Path.cwd().resolve()
    if here == folder or folder in here.parents:
        move = f"mkdir data && mv {source} data/ && gobblin-py new … --from data/{path.name}" if path.is_file() else \
            "run `new` from a directory outside it"
        raise ConfigError(f"--from {source}: its folder {folder} holds the current directory, where the job keeps "
                          f"./work and ./output, so each run would read what it wrote: {move}")


def job_text(name: str, source_from: str, document: dict[str, Any]) -> str:
    """The job file as a person edits it: one section after another, with the line that made it."""
    head = f"# {name}: written by `gobblin-py new {name} --from {source_from}`; edit it freely\n"
    return head + "".join(yaml.safe_dump({k: v}, sort_keys=False, default_flow_style=None) for k, v in document.items())


def new_command(
    name: Annotated[str, typer.Argument(help="the job's name (job.name): its state, work directory and output are its own", show_default=False)],
    source_from: Annotated[str, typer.Option("--from", help="what to read: a directory or file (CSV, JSON lines), an s3:// URL, "
                                                            "kafka://HOST:PORT/TOPIC, or a topic's name on --brokers", show_default=False)],
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir", help="where to write NAME.yaml (and schemas/NAME.avsc)")] = Path("jobs"),
    writer: Annotated[str | None, typer.Option("--writer", help="parquet, avro or json [default: parquet where the tables extra is installed, else avro]", show_default=False)] = None,
    brokers: Annotated[str, typer.Option("--brokers", help="the Kafka bootstrap servers of a bare topic name")] = "127.0.0.1:9092",
    records: Annotated[int, typer.Option("--records", "-n", min=1, help="how many records to sample of each dataset for the schema")] = 1000,
    force: Annotated[bool, typer.Option("--force", help="overwrite the job file and schema if they exist")] = False,
) -> None:
    """Write jobs/NAME.yaml over your own data, with its own job.name and work_dir (./work/NAME, so it never shares
    another job's state), the Avro schema inferred from a sample (as `infer` does), validated; then print the two
    commands to look at it and run it. Paths in it are relative to the current directory, as `run` reads them.

    Example: gobblin-py new orders --from ~/exports/orders
    """
    from gobblin_py.builtin.extras import installed
    from gobblin_py.builtin.schemas.infer import schema_text
    from gobblin_py.cli.infer_command import infer_job
    from gobblin_py.cli.output import err, fail, out
    from gobblin_py.config import load_job
    from gobblin_py.config.loader import load_document

    job_file, schema_file = jobs_dir / f"{name}.yaml", jobs_dir / "schemas" / f"{name}.avsc"
    chosen = writer is None
    if writer is None:  # a base install (README's first command) has no pyarrow: its job must still run
        writer = "parquet" if installed("pyarrow.parquet") else "avro"
    try:
        if not NAME.match(name):
            raise ConfigError(f"job name {name!r}: letters, digits, '_', '.' and '-' only, starting with a letter or digit")
        if writer not in ("parquet", "avro", "json"):
            raise ConfigError(f"--writer {writer}: one of parquet, avro, json")
        for existing in (job_file, schema_file):
            if existing.exists() and not force:
                raise ConfigError(f"{existing} exists; pass --force to overwrite it, or choose another NAME")
        _apart_from_input(source_from)
        document: dict[str, Any] = {
            "job": {"name": name, "work_dir": f"./work/{name}"},
            "source": source_section(source_from, name, brokers),
            "writer": {"class": writer},
            "publisher": {"final_dir": f"./output/{name}"},
        }
        sample = infer_job(load_document(job_file, document, writer_schema=False), records, None,
                           re.sub(r"\W", "_", name.title()) or "Record")
        schema_file.parent.mkdir(parents=True, exist_ok=True)
        schema_file.write_text(schema_text(sample.inferred.schema))
        document = {**dict(list(document.items())[:2]), "converters": [{"class": "json_to_avro", "schema": str(schema_file)}],
                    **dict(list(document.items())[2:])}
        job_file.write_text(job_text(name, source_from, document))
        job = load_job(job_file)
    except GobblinError as exc:
        fail(exc)
        return
    inferred = sample.inferred
    if chosen and writer == "avro":
        err.print("writer: avro, as pyarrow is not installed here (pip install 'gobblin-py[tables]' for Parquet, then "
                  "--writer parquet)", markup=False)
    for note in [*inferred.notes, *([sample.merged] if sample.merged else [])]:
        err.print(note, markup=False)
    seen = ", ".join(f"{ds} {n}" for ds, n in sample.seen.items())
    out.print(f"wrote {job_file} (job {job.name!r}, state and commit log under ./work/{name}, output under ./output/{name})\n"
              f"wrote {schema_file}: {len(inferred.schema['fields'])} fields inferred from {inferred.records} records ({seen}); "
              "check it\nnext:\n"
              f"  gobblin-py plan {job_file}    # what a run would read\n"
              f"  gobblin-py run {job_file}     # read it, publish it exactly once", markup=False)
