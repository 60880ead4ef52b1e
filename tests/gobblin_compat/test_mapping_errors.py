"""What a user of a Gobblin job file hears: unsupported classes and values as errors naming the key, keys with no
effect and unused keys as warnings (errors with --strict), validation problems traced back to the Gobblin key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.jobs import EVENT_SCHEMA, run_cli

from gobblin_py.config import load_job
from gobblin_py.config.gobblin.load import translate_file
from gobblin_py.config.gobblin.mapping import CLASSES, KEYS, markdown_tables
from gobblin_py.errors import ConfigError

KAFKA = "org.apache.gobblin.source.extractor.extract.kafka.KafkaSimpleSource"


def _job(tmp: Path, text: str, name: str = "job.pull") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def test_every_unsupported_class_is_listed_with_its_key_and_the_cli_exits_2(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=quickstart
source.class={KAFKA}
kafka.brokers=127.0.0.1:9092
converter.classes=gobblin.converter.json.BytesToJsonConverter,com.acme.MyConverter
writer.builder.class=org.apache.gobblin.writer.SimpleDataWriterBuilder
writer.output.format=txt
data.publisher.type=org.apache.gobblin.publisher.BaseDataPublisherWithHiveRegistration
data.publisher.final.dir={tmp_path}/out
qualitychecker.task.policies=org.apache.gobblin.policies.count.RowCountPolicy
qualitychecker.task.policy.types=FAIL,OPTIONAL
""")
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: {job}: invalid Gobblin job file (4 problems):"
    # each problem names the key and where it was written (relative to the directory the command runs in)
    assert "  converter.classes (job.pull:4): unsupported Gobblin converter class 'com.acme.MyConverter': gobblin-py has no equivalent" in lines
    assert any(line.startswith("  writer.builder.class (job.pull:5): SimpleDataWriterBuilder writes each record's bytes "
                               "as they are: it needs the messages of a Kafka source with no converters") for line in lines)
    assert any(line.startswith("  data.publisher.type (job.pull:7): unsupported Gobblin publisher class") and "Hive registration" in line for line in lines)
    assert "  qualitychecker.task.policy.types (job.pull:10): names 2 type(s) for the 1 policies of qualitychecker.task.policies" in lines


def test_unused_keys_warn_and_fail_only_with_strict(tmp_path: Path) -> None:
    schema = EVENT_SCHEMA.read_text().replace("\n", " ")
    job = _job(tmp_path, f"""job.name=strictness
job.group=g
source.class={KAFKA}
kafka.brokers=127.0.0.1:9092
topic.whitelist=events
converter.classes=org.apache.gobblin.converter.json.BytesToJsonConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter
source.schema={schema}
writer.file.path.type=tablename
data.publisher.final.dir={tmp_path}/out
mr.job.root.dir={tmp_path}/work
kafka.shcema.registry.url=http://typo
""")
    lenient = run_cli("validate", str(job), cwd=tmp_path)
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stdout.strip() == f"{job}: valid job 'strictness' (source kafka, 1 converter, 1 branch)"
    assert "warning: kafka.shcema.registry.url (job.pull:11): not used by gobblin-py" in lenient.stderr.splitlines()
    assert "warning: job.group (job.pull:2): not applied: gobblin-py names a job by job.name alone" in lenient.stderr.splitlines()
    strict = run_cli("validate", str(job), "--strict", cwd=tmp_path)
    assert strict.returncode == 2
    assert strict.stderr.splitlines()[-2:] == [f"error: {job}: invalid Gobblin job file (1 problem):",
                                               "  kafka.shcema.registry.url (job.pull:11): not used by gobblin-py"]


def test_a_validation_problem_names_the_gobblin_key_behind_it(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=bad values
source.class={KAFKA}
kafka.brokers=127.0.0.1:9092
mr.job.max.mappers=0
data.publisher.final.dir={tmp_path}/out
writer.file.path.type=tablename
""")
    with pytest.raises(ConfigError) as caught:
        load_job(job)
    lines = caught.value.message.splitlines()
    assert any(line.startswith("  job.name: String should match pattern") and line.endswith(f"[from job.name ({job}:1)]") for line in lines)
    assert any(line.startswith("  source.max_workunits: Input should be greater than or equal to 1")
               and line.endswith(f"[from mr.job.max.mappers ({job}:4)]") for line in lines)


def test_values_gobblin_py_cannot_honour_are_refused(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=j
job.commit.policy=partial
source.class={KAFKA}
kafka.brokers=h:9092
reset.on.offset.out.of.range=nearest
data.publisher.final.dir=/out
data.publisher.replace.final.dir=true
writer.partitioner.class=org.apache.gobblin.writer.partitioner.TimeBasedAvroWriterPartitioner
writer.partition.columns=ts
writer.partition.timezone=America/Los_Angeles
writer.partition.prefix=hourly
""")
    with pytest.raises(ConfigError) as caught:
        translate_file(job)
    message = caught.value.message
    for key, why in (("job.commit.policy", "'partial' is not supported"), ("reset.on.offset.out.of.range", "'nearest' is not supported"),
                     ("data.publisher.replace.final.dir", "never deletes what it did not write"),
                     ("writer.partition.timezone", "'America/Los_Angeles': gobblin-py partitions in UTC only"),
                     ("writer.partition.prefix", "not supported: partition prefixes are not supported")):
        assert f"  {key} ({job}:" in message and why in message, (key, message)


def test_an_unset_partition_zone_is_a_warning_about_gobblins_default(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=j
source.class={KAFKA}
kafka.brokers=h:9092
data.publisher.final.dir=/out
writer.file.path.type=tablename
writer.partitioner.class=gobblin.writer.partitioner.TimeBasedAvroWriterPartitioner
writer.partition.columns=ts
""")
    translation = translate_file(job)
    assert translation.document["writer"]["partition"] == {"column": "ts", "granularity": "HOUR", "pattern": "yyyy/MM/dd/HH"}
    assert any("partitions are cut in UTC; Gobblin's default zone is America/Los_Angeles" in w for w in translation.warnings)


def test_convert_writes_a_yaml_job_that_validates_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "in" / "orders"
    data.mkdir(parents=True)
    (data / "a.csv").write_text("id,ts,user,kind,amount,country\n1,2026-01-01T10:00:00Z,u1,order,1.5,DE\n")
    jobs = Path(__file__).parent / "jobs"
    env = {"INPUT": str(tmp_path / "in"), "GOBBLIN_WORK_DIR": str(tmp_path / "gw")}
    result = run_cli("convert", str(jobs / "csv-to-avro.pull"), "-o", "converted/csv.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    written = tmp_path / "converted" / "csv.yaml"
    schemas = list((tmp_path / "converted").glob("csv.orders-*.avsc"))
    assert len(schemas) == 1
    assert result.stdout.strip() == f"{jobs / 'csv-to-avro.pull'}: wrote converted/csv.yaml, converted/{schemas[0].name}"
    assert "warning: extract.table.type (" in result.stderr  # what is not applied is said, on stderr and in the file
    document = yaml.safe_load(written.read_text())
    # the schema beside the YAML file, found wherever the job runs from
    assert document["converters"] == [{"class": "json_to_avro", "schema": f"${{JOB_FILE_DIR}}/{schemas[0].name}"}]
    assert document["writer"] == {"class": "avro", "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}}
    assert document["publisher"] == {"class": "fs", "final_dir": "${GOBBLIN_WORK_DIR}/job-output"}
    assert "# warning: extract.table.type" in written.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not where convert ran
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = load_job(written)
    assert spec.name == "CsvToAvro" and spec.source.settings.root_dataset == "orders"
    assert spec.converters[0].settings.schema_file == schemas[0]


def test_convert_names_one_topic_as_a_topic_and_keeps_a_pattern_a_pattern(tmp_path: Path) -> None:
    from support.jobs import REPO

    done = run_cli("convert", str(REPO / "jobs" / "kafka-to-avro.pull"), "-o", "k.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    source = yaml.safe_load((tmp_path / "k.yaml").read_text())["source"]
    assert source["topics"] == ["events"] and "topic_pattern" not in source
    (tmp_path / "p.pull").write_text((REPO / "jobs" / "kafka-to-avro.pull").read_text()
                                     .replace("topic.whitelist=events", "topic.whitelist=events.*"))
    done = run_cli("convert", "p.pull", "-o", "p.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((tmp_path / "p.yaml").read_text())["source"]["topic_pattern"] == "(?:events.*)"


def test_convert_keeps_env_references_instead_of_this_machines_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = Path(__file__).parent / "jobs"
    here = {"INPUT": str(tmp_path / "here" / "in"), "GOBBLIN_WORK_DIR": str(tmp_path / "here" / "gw")}
    (tmp_path / "here" / "in" / "orders").mkdir(parents=True)
    result = run_cli("convert", str(jobs / "csv-to-avro.pull"), "-o", "csv.yaml", cwd=tmp_path, env=here)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "csv.yaml").read_text()
    assert str(tmp_path / "here") not in text  # nothing of the converting machine's environment is baked in
    assert "# ${VAR} is read from the environment when the job runs, as Gobblin's ${env:VAR}: GOBBLIN_WORK_DIR, INPUT" in text
    document = yaml.safe_load(text)
    assert document["job"]["work_dir"] == "${GOBBLIN_WORK_DIR}/working"
    assert document["source"]["path"] == "${INPUT}/orders"
    there = tmp_path / "there"
    (there / "in" / "orders").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INPUT", str(there / "in"))
    monkeypatch.setenv("GOBBLIN_WORK_DIR", str(there / "gw"))
    spec = load_job(tmp_path / "csv.yaml")  # where the job runs, its own environment decides
    assert spec.job.work_dir == there / "gw" / "working"
    assert str(spec.source.settings.path) == str(there / "in" / "orders")
    assert spec.branches[0].publisher.settings.final_dir == str(there / "gw" / "job-output")


def test_an_env_reference_read_while_translating_is_written_as_its_value_with_a_warning(tmp_path: Path) -> None:
    schema = EVENT_SCHEMA.read_text().replace("\n", " ")
    job = _job(tmp_path, f"""job.name=retries
source.class={KAFKA}
kafka.brokers=${{env:BROKERS}}
converter.classes=org.apache.gobblin.converter.json.BytesToJsonConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter
source.schema={schema}
task.maxretries=${{env:RETRIES}}
writer.file.path.type=tablename
data.publisher.final.dir={tmp_path}/out
mr.job.root.dir={tmp_path}/work
""")
    result = run_cli("convert", str(job), "-o", "retries.yaml", cwd=tmp_path, env={"BROKERS": "127.0.0.1:9092", "RETRIES": "4"})
    assert result.returncode == 0, result.stderr
    assert "warning: each ${env:VAR} of the file is written as its value here" in result.stderr
    document = yaml.safe_load((tmp_path / "retries.yaml").read_text())
    assert document["job"]["max_task_retries"] == 4 and document["source"]["bootstrap_servers"] == ["127.0.0.1:9092"]


def test_the_mapping_table_covers_what_the_readme_lists() -> None:
    table = markdown_tables()
    assert all(f"`{c.name.removeprefix('org.apache.gobblin.')}`" in table for c in CLASSES.values())
    assert all(f"`{k.key}`" in table for k in KEYS)
    refused = [c for c in CLASSES.values() if c.becomes is None and c.parses is None]
    assert all(c.note for c in refused), "a refused class says why"


def test_gobblin_py_settings_can_ride_along_in_a_gobblin_file(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=j
source.class={KAFKA}
kafka.brokers=h:9092
data.publisher.final.dir=/out
writer.file.path.type=tablename
gobblin-py.spark.master=local[2]
gobblin-py.spark.conf.spark.driver.memory=2g
gobblin-py.job.commit_parallelism=2
""")
    document = translate_file(job).document
    assert document["spark"] == {"master": "local[2]", "conf": {"spark.driver.memory": "2g"}}
    assert document["job"]["commit_parallelism"] == "2"


def test_an_offsets_file_is_read_strictly(tmp_path: Path) -> None:
    from gobblin_py.config.gobblin.offsets import read_offsets

    good = tmp_path / "good.csv"
    good.write_text("# exported from Gobblin\ntopic,partition,offset\nevents,0,1500\nevents, 1 ,1200\nclicks,0,7\nevents,0,1500\n")
    assert read_offsets(good) == {"events": {"0": 1500, "1": 1200}, "clicks": {"0": 7}}
    bad = tmp_path / "bad.csv"
    bad.write_text("events,0,1500\nevents,0,1600\nclicks,x,1\nclicks;0;1\n")
    with pytest.raises(ConfigError) as caught:
        read_offsets(bad)
    assert caught.value.message.splitlines() == [
        f"{bad}: bad offsets file (3 problems):",
        f"  {bad}:2: events partition 0 is given again with another offset (first at line 1)",
        f"  {bad}:3: partition and offset must be whole numbers ≥ 0; got 'x', '1'",
        f"  {bad}:4: expected topic,partition,offset; got 'clicks;0;1'",
    ]


def test_importing_offsets_into_a_job_that_is_not_kafka_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    schema = EVENT_SCHEMA.read_text().replace("\n", " ")
    job = _job(tmp_path, f"""job.name=files
source.class=org.apache.gobblin.source.extractor.filebased.TextFileBasedSource
source.filebased.data.directory={tmp_path}/in
converter.classes=org.apache.gobblin.converter.json.JsonStringToJsonIntermediateConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter
source.schema={schema}
data.publisher.final.dir={tmp_path}/out
writer.file.path.type=tablename
mr.job.root.dir={tmp_path}/work
""")
    (tmp_path / "offsets.csv").write_text("events,0,5\n")
    result = run_cli("state", "reset", str(job), "--import-offsets", "offsets.csv", "--new", "--yes", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: --import-offsets sets Kafka offsets, and job 'files' reads from 'files', not kafka"
    assert not (tmp_path / "work" / "state").exists()


def test_a_forked_job_reads_branch_keys_only_with_their_suffix(tmp_path: Path) -> None:
    job = _job(tmp_path, f"""job.name=j
source.class={KAFKA}
kafka.brokers=h:9092
fork.branches=2
qualitychecker.task.policies=org.apache.gobblin.policies.count.RowCountPolicy
qualitychecker.task.policy.types=FAIL
qualitychecker.task.policies.1=org.apache.gobblin.policies.count.RowCountRangePolicy
qualitychecker.task.policy.types.1=OPTIONAL
qualitychecker.row.count.range=0.1
writer.codec.type=snappy
data.publisher.final.dir.0=/out/a
data.publisher.final.dir.1=/out/b
writer.file.path.type.0=tablename
writer.file.path.type.1=tablename
""")
    translation = translate_file(job)
    first, second = translation.document["fork"]["branches"]
    assert "quality" not in translation.document and "quality" not in first
    assert second["quality"] == {"task": [{"class": "row_count_range", "type": "OPTIONAL", "range": "0.1"}]}
    assert first["writer"] == second["writer"] == {"class": "avro"}  # an unsuffixed writer key is not a branch's
    assert (first["name"], first["publisher"]["final_dir"], second["publisher"]["final_dir"]) == ("fork_0", "/out/a", "/out/b")
    assert sorted(u.split(" ")[0] for u in translation.unused) == [
        "qualitychecker.task.policies", "qualitychecker.task.policy.types", "writer.codec.type"]
    assert all("with fork.branches=2 each branch N reads" in u for u in translation.unused)
    assert any(n.startswith("fork.branches=2: each branch's files go to <its final dir>/<table>/<branch name>/") for n in translation.notes)


def test_a_lock_turned_off_is_translated_to_the_lock_on_with_a_warning(tmp_path: Path) -> None:
    """Gobblin's Kafka quick start sets job.lock.enabled=false; under exactly-once delivery two overlapping runs
    would then publish the same records twice, so the translation keeps the lock and says so."""
    schema = EVENT_SCHEMA.read_text().replace("\n", " ")
    job = _job(tmp_path, f"""job.name=unlocked
job.lock.enabled=false
source.class={KAFKA}
kafka.brokers=127.0.0.1:9092
topic.whitelist=events
converter.classes=org.apache.gobblin.converter.json.BytesToJsonConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter
source.schema={schema}
data.publisher.final.dir={tmp_path}/out
mr.job.root.dir={tmp_path}/work
""")
    converted = run_cli("convert", str(job), "-o", "unlocked.yaml", cwd=tmp_path)
    assert converted.returncode == 0, converted.stderr
    warning = next((w for w in converted.stderr.splitlines() if w.startswith("warning: job.lock.enabled (job.pull:2)")), None)
    assert warning is not None, converted.stderr
    assert "translated to job.lock: true" in warning and "publish the same records twice" in warning
    assert yaml.safe_load((tmp_path / "unlocked.yaml").read_text())["job"]["lock"] is True
    validated = run_cli("validate", str(job), "--strict", cwd=tmp_path)  # a warning, not an unused key
    assert validated.returncode == 0, validated.stderr
    assert load_job(job).job.lock is True


def test_one_validation_names_every_unsupported_class_wherever_it_is_written(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    job = _job(tmp_path, f"""job.name=many
source.class=org.apache.gobblin.source.extractor.filebased.TextFileBasedSource
source.filebased.data.directory={tmp_path}/in
source.skip.first.record=true
converter.classes=org.apache.gobblin.converter.csv.CsvToJsonConverterV2,com.acme.Enricher
writer.builder.class=com.acme.MyWriterBuilder
writer.partitioner.class=com.acme.MyPartitioner
fork.operator.class=com.acme.MyForkOperator
converter.classes.0=com.acme.BranchConverter
qualitychecker.task.policies.0=com.acme.BranchPolicy
qualitychecker.task.policy.types.0=FAIL
writer.builder.class.1=com.acme.OtherWriterBuilder
data.publisher.final.dir={tmp_path}/out
writer.file.path.type=tablename
""")
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: {job}: invalid Gobblin job file (7 problems):"
    named = {line.split(" (", 1)[0].strip(): line for line in lines[1:]}
    assert sorted(named) == ["converter.classes", "converter.classes.0", "fork.operator.class", "qualitychecker.task.policies.0",
                             "writer.builder.class", "writer.builder.class.1", "writer.partitioner.class"]
    assert "'com.acme.MyPartitioner'" in named["writer.partitioner.class"]
    assert "unsupported Gobblin fork operator class 'com.acme.MyForkOperator'" in named["fork.operator.class"]
    assert named["converter.classes.0"].endswith("unsupported Gobblin converter class 'com.acme.BranchConverter': gobblin-py "
                                                 "has no equivalent (a branch key: with fork.branches unset or 1, "
                                                 "converter.classes is read, not converter.classes.0)")
    assert "'com.acme.BranchPolicy'" in named["qualitychecker.task.policies.0"]
    assert "'com.acme.OtherWriterBuilder'" in named["writer.builder.class.1"]


def test_a_supported_class_in_a_branch_key_of_an_unforked_job_is_only_unused(tmp_path: Path) -> None:
    schema = EVENT_SCHEMA.read_text().replace("\n", " ")
    job = _job(tmp_path, f"""job.name=unforked
source.class={KAFKA}
kafka.brokers=127.0.0.1:9092
converter.classes=org.apache.gobblin.converter.json.BytesToJsonConverter,org.apache.gobblin.converter.avro.JsonIntermediateToAvroConverter
source.schema={schema}
fork.operator.class=org.apache.gobblin.fork.IdentityForkOperator
writer.builder.class.0=org.apache.gobblin.writer.AvroDataWriterBuilder
writer.file.path.type=tablename
data.publisher.final.dir={tmp_path}/out
mr.job.root.dir={tmp_path}/work
""")
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ("warning: writer.builder.class.0 (job.pull:7): not used: a branch key; with fork.branches unset or 1, "
            "writer.builder.class is read, not writer.builder.class.0") in result.stderr.splitlines()
