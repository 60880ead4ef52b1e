"""A writer that needs an Avro schema (avro, parquet) is refused at validation when nothing before it gives one,
naming the fix; and a task that fails at run time says why without pointing into the package's source."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.jobs import EVENT_SCHEMA, example_job, run_cli, write_job

from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

_FIX = "add a json_to_avro converter naming an .avsc file"


def _csv_input(tmp: Path) -> Path:
    data = tmp / "in"
    data.mkdir()
    (data / "a.csv").write_text("id,name\n1,ann\n2,bob\n")
    return data


@pytest.mark.parametrize("writer", ["avro", "parquet"])
def test_validate_refuses_a_csv_job_whose_writer_gets_no_avro_schema(tmp_path: Path, writer: str) -> None:
    job = write_job(tmp_path, example_job(tmp_path, source={"class": "files", "path": str(_csv_input(tmp_path))},
                                          converters=None, quality=None, writer={"class": writer}))
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"  writer.class: {writer} needs an Avro record schema, and no converter gives one: source files reads " \
           f"records without one; {_FIX} to converters" in result.stderr


def test_a_converter_that_keeps_the_schema_does_not_give_one_and_json_to_avro_does(tmp_path: Path) -> None:
    data = _csv_input(tmp_path)
    keeps = example_job(tmp_path, source={"class": "files", "path": str(data)}, quality=None,
                        converters=[{"class": "select_fields", "fields": ["id"]}])
    with pytest.raises(ConfigError, match=r"writer.class: avro needs an Avro record schema"):
        load_job(write_job(tmp_path, keeps))
    gives = example_job(tmp_path, source={"class": "files", "path": str(data)}, quality=None,
                        converters=[{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)},
                                    {"class": "select_fields", "fields": ["id"]}])
    assert load_job(write_job(tmp_path, gives)).branches[0].writer.name == "avro"
    jsonl = example_job(tmp_path, source={"class": "files", "path": str(data)}, quality=None, converters=None,
                        writer={"class": "jsonl"})
    assert load_job(write_job(tmp_path, jsonl)).branches[0].writer.name == "jsonl"


def test_each_forked_branch_is_checked_with_its_own_converters(tmp_path: Path) -> None:
    job = example_job(tmp_path, source={"class": "files", "path": str(_csv_input(tmp_path))}, quality=None,
                      converters=None, writer=None, publisher=None,
                      fork={"class": "identity", "branches": [
                          {"name": "typed", "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
                           "writer": {"class": "avro"}, "publisher": {"class": "fs", "final_dir": str(tmp_path / "o1")}},
                          {"name": "raw", "writer": {"class": "avro"}, "publisher": {"class": "fs", "final_dir": str(tmp_path / "o2")}}]})
    with pytest.raises(ConfigError) as caught:
        load_job(write_job(tmp_path, job))
    problems = [line for line in caught.value.message.splitlines() if "needs an Avro record schema" in line]
    assert len(problems) == 1 and problems[0].startswith("  fork.branches[1].writer.class: avro needs"), caught.value.message


def test_a_gobblin_csv_job_with_no_avro_converter_is_refused_naming_its_writer_key(tmp_path: Path) -> None:
    data = _csv_input(tmp_path)
    job = tmp_path / "csv.pull"
    job.write_text(textwrap.dedent(f"""\
        job.name=csvNoAvro
        source.class=org.apache.gobblin.source.extractor.filebased.TextFileBasedSource
        source.filebased.data.directory={data}
        source.skip.first.record=true
        converter.classes=org.apache.gobblin.converter.csv.CsvToJsonConverterV2
        writer.builder.class=org.apache.gobblin.writer.AvroDataWriterBuilder
        writer.file.path.type=tablename
        data.publisher.final.dir={tmp_path}/out
        mr.job.root.dir={tmp_path}/work
        """))
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert any(line.startswith("  writer.class: avro needs an Avro record schema") and _FIX in line
               and line.endswith("[from writer.builder.class (csv.pull:6)]") for line in result.stderr.splitlines()), result.stderr


_PLUGIN = '''
from gobblin_py.api import Extractor, Source, WorkUnit


class JsonSchemaExtractor(Extractor):
    def get_schema(self):
        return {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]} if FAIL else {"type": "json"}

    def read_records(self):
        if FAIL:
            raise RuntimeError("the plugin's own failure")
        yield {"id": 1}

    def actual_high_watermark(self):
        return 1


class OneRecordSource(Source):
    """A user's source that does not say what schema its records carry (validation cannot tell)."""

    def get_workunits(self, state):
        return [WorkUnit(id="one", dataset="things", watermark_key="k", low_watermark=0, expected_high_watermark=1)]

    def get_extractor(self, workunit, context):
        return JsonSchemaExtractor()

    def estimated_bytes(self, workunit, state):
        return 1.0
'''


def _plugin_job(tmp: Path, fail: bool) -> Path:
    (tmp / "my_source.py").write_text(f"FAIL = {fail}\n" + _PLUGIN)
    job = example_job(tmp, source={"class": "my_source:OneRecordSource"}, converters=None, quality=None,
                      writer={"class": "avro"}, job={"name": "plugin", "work_dir": str(tmp / "work"), "max_task_retries": 0})
    return write_job(tmp, job)


def test_a_task_failing_for_want_of_a_schema_says_so_without_a_source_location(tmp_path: Path) -> None:
    result = run_cli("run", str(_plugin_job(tmp_path, fail=False)), "--in-process", cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "the avro writer needs an Avro record schema, and its records have none; add a json_to_avro converter" in output
    assert "(at " not in output and ".py:" not in output


def test_a_plugins_own_failure_shows_where_only_with_verbose(tmp_path: Path) -> None:
    job = _plugin_job(tmp_path, fail=True)
    plain = run_cli("run", str(job), "--in-process", cwd=tmp_path)
    assert plain.returncode != 0
    assert "RuntimeError: the plugin's own failure" in plain.stdout + plain.stderr
    assert "(at " not in plain.stdout + plain.stderr
    verbose = run_cli("run", str(job), "--in-process", "--verbose", cwd=tmp_path)
    assert "RuntimeError: the plugin's own failure (at " in verbose.stdout + verbose.stderr
