"""Gobblin's own example `gobblin-example/src/main/resources/csvToAvro.conf` runs unchanged: StringSchemaInjector's
schema names the columns of headerless CSV and is the Avro schema written; the job is named after its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from avro.datafile import DataFileReader
from avro.io import DatumReader
from support.jobs import run_cli

from gobblin_py.config.gobblin.load import translate_file
from gobblin_py.errors import ConfigError

EXAMPLE = Path(__file__).parent / "jobs" / "csvToAvro.conf"
_DIRS = {"source.filebased.data.directory=/tmp/csvSource": "source.filebased.data.directory={}/csvSource",
         "data.publisher.final.dir=/tmp/csvToAvro": "data.publisher.final.dir={}/csvToAvro"}


def _example_in(tmp: Path) -> Path:
    """The example with the two directories Gobblin's docs say to set pointed into `tmp`; every other line as shipped."""
    lines = EXAMPLE.read_text().splitlines()
    assert set(_DIRS) <= set(lines)
    job = tmp / "csvToAvro.conf"
    job.write_text("\n".join(_DIRS[line].format(tmp) if line in _DIRS else line for line in lines) + "\n")
    (tmp / "csvSource").mkdir()
    return job


def _read_avro(root: Path) -> tuple[list[dict], list[dict]]:
    """Every record under `root` and each file's writer schema, read with Apache Avro's own reader."""
    records, schemas = [], []
    for path in sorted(root.rglob("*.avro")):
        with DataFileReader(path.open("rb"), DatumReader()) as reader:
            schemas.append(json.loads(reader.get_meta("avro.schema")))
            records += list(reader)
    return records, schemas


def test_gobblins_csv_to_avro_example_runs_unchanged_on_headerless_csv(tmp_path: Path) -> None:
    job = _example_in(tmp_path)
    (tmp_path / "csvSource" / "people.csv").write_text('1,ann,31,9.5\n2,bob,,\n3,"lee, jo",40,1.25\n')
    validated = run_cli("validate", str(job), cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    assert validated.stdout.strip() == f"{job}: valid job 'csvToAvro' (source files, 1 converter, 1 branch)"
    said = "warning: job.name is not set: the job is named 'csvToAvro' after its file name"
    assert any(line.startswith(said) for line in validated.stderr.splitlines()), validated.stderr

    result = run_cli("run", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCEEDED job csvToAvro" in result.stdout
    out = tmp_path / "csvToAvro" / "org" / "apache" / "gobblin" / "example" / "CsvToAvro"  # namespace, then table
    records, schemas = _read_avro(out)
    assert sorted(records, key=lambda r: r["ID"]) == [
        {"ID": "1", "NAME": "ann", "AGE": 31, "SCORE": 9.5},
        {"ID": "2", "NAME": "bob", "AGE": None, "SCORE": None},  # empty fields of nullable columns are null
        {"ID": "3", "NAME": "lee, jo", "AGE": 40, "SCORE": 1.25},
    ]
    [schema] = schemas
    assert schema["name"] == "org.apache.gobblin.example.CsvToAvro"
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [
        ("ID", ["null", "string"]), ("NAME", ["null", "string"]), ("AGE", ["null", "int"]), ("SCORE", ["null", "double"])]
    assert (tmp_path / "work" / "state" / "csvToAvro").is_dir()  # the derived name keeps the job's state


def test_a_quoted_injected_schema_reads_as_the_bare_one(tmp_path: Path) -> None:
    job = _example_in(tmp_path)
    text = job.read_text()
    start = text.index("gobblin.converter.schemaInjector.schema=") + len("gobblin.converter.schemaInjector.schema=")
    end = text.index("\n", start)
    quoted = tmp_path / "quoted.conf"
    quoted.write_text(text[:start] + '"""' + text[start:end] + '"""' + text[end:])
    bare, triple = translate_file(job), translate_file(quoted)
    assert bare.document["source"]["csv_columns"] == triple.document["source"]["csv_columns"] == ["ID", "NAME", "AGE", "SCORE"]
    assert bare.schemas[0][1] == triple.schemas[0][1]


def test_headerless_csv_with_no_schema_to_name_its_columns_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    job = tmp_path / "noschema.pull"
    job.write_text(f"""source.class=org.apache.gobblin.source.extractor.filebased.TextFileBasedSource
source.filebased.data.directory={tmp_path}/in
converter.classes=org.apache.gobblin.converter.StringSchemaInjector,org.apache.gobblin.converter.csv.CsvToJsonConverter
data.publisher.final.dir={tmp_path}/out
writer.builder.class=org.apache.gobblin.writer.AvroDataWriterBuilder
""")
    with pytest.raises(ConfigError) as caught:
        translate_file(job)
    [problem] = caught.value.message.splitlines()[1:]
    assert problem.startswith("  converter.classes (") and problem.endswith(
        "noschema.pull:3): CSV files with no header row (source.skip.first.record unset or false) take their column "
        "names from gobblin.converter.schemaInjector.schema, which is not set: set it (a JSON-intermediate list of "
        "columns or an Avro record schema), or set source.skip.first.record=true for files whose first row names the columns")


def test_the_schema_injector_must_come_before_the_avro_converter(tmp_path: Path) -> None:
    job = _example_in(tmp_path)
    text = job.read_text().replace(
        "org.apache.gobblin.converter.StringSchemaInjector,org.apache.gobblin.converter.csv.CsvToJsonConverter,"
        "org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter",
        "org.apache.gobblin.converter.csv.CsvToJsonConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter,"
        "org.apache.gobblin.converter.StringSchemaInjector")
    job.write_text(text)
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2
    assert "'org.apache.gobblin.converter.StringSchemaInjector' must come before JsonIntermediateToAvroConverter" in result.stderr
