"""Gobblin job files are read as Gobblin reads them: Java Properties.load rules, HOCON, include=, templates,
jobconf.dir defaults and ${…} interpolation (no Spark, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gobblin_py.config.gobblin.load import translate_file
from gobblin_py.config.gobblin.properties import parse_properties
from gobblin_py.config.gobblin.resolve import resolve_job
from gobblin_py.errors import ConfigError


def _values(text: str) -> dict[str, str]:
    return {e.key: e.value for e in parse_properties(text, "job.pull").entries}


def test_java_properties_rules_give_the_values_java_gives() -> None:
    text = (
        "# a comment\n"
        "! also a comment \\\n"
        "plain=value\n"
        "colon:value2\n"
        "spaced   value 3  \n"
        "  indented = x\n"
        "multi=a,\\\n"
        "      b,\\\n"
        "      c\n"
        "escaped\\=key=v\n"
        "unicode=caf\\u00e9\\tend\n"
        "empty=\n"
        "trailing=ends with backslash \\\\\n"
        "windows=crlf\r\n"
    )
    assert _values(text) == {
        "plain": "value", "colon": "value2", "spaced": "value 3  ", "indented": "x", "multi": "a,b,c",
        "escaped=key": "v", "unicode": "café\tend", "empty": "", "trailing": "ends with backslash \\", "windows": "crlf",
    }


def test_an_inline_comment_stays_in_the_value_and_is_warned() -> None:
    parsed = parse_properties("writer.codec.type=snappy # fast\nurl=http://h/#frag\n", "job.pull")
    assert {e.key: e.value for e in parsed.entries} == {"writer.codec.type": "snappy # fast", "url": "http://h/#frag"}
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("job.pull:1: writer.codec.type: the value holds '# fast'")
    assert "no inline comments" in parsed.warnings[0]


def test_a_malformed_unicode_escape_is_refused_naming_the_line() -> None:
    with pytest.raises(ConfigError, match=r"job.pull:2: malformed \\uxxxx escape"):
        parse_properties("a=1\nb=\\u12G4\n", "job.pull")


def test_defaults_templates_includes_and_interpolation_stack_as_in_gobblin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "jobconf"
    team = root / "team"
    team.mkdir(parents=True)
    (root / "site.properties").write_text("owner=site\nfs.base=/data\nregion=eu\n")
    (team / "team.properties").write_text("owner=team\n")
    (team / "common.inc").write_text("included=yes\nregion=us\n")
    (team / "base.template").write_text("gobblin.template.required_attributes=topic.whitelist\nfrom.template=t\nowner=template\n")
    job = team / "job.pull"
    job.write_text("job.template=base.template\ninclude=common.inc\ntopic.whitelist=events\n"
                   "out=${fs.base}/${owner}/${env:TEAM_SUFFIX}\n")
    monkeypatch.setenv("GOBBLIN_JOB_CONFIG_DIR", str(root))
    monkeypatch.setenv("TEAM_SUFFIX", "x1")
    settings = resolve_job(job).settings
    values = {k: s.value for k, s in settings.items()}
    assert values["owner"] == "team"            # the closest directory's defaults win over the farther and the template
    assert values["from.template"] == "t"       # the template fills in what nothing else sets
    assert values["included"] == "yes" and values["region"] == "us"  # include= over the directory defaults
    assert values["out"] == "/data/team/x1"
    assert settings["owner"].origin.endswith("team.properties:1")


def test_a_template_attribute_the_job_does_not_set_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "kafka.template").write_text("gobblin.template.required_attributes=topic.whitelist,kafka.brokers\n")
    job = tmp_path / "job.pull"
    job.write_text("job.name=j\njob.template=resource:///kafka.template\nkafka.brokers=h:9092\n")
    with pytest.raises(ConfigError) as caught:
        translate_file(job)
    assert f"job.template ({job}:2): the template {tmp_path / 'kafka.template'} requires" in caught.value.message
    assert "requires topic.whitelist, which the job file does not set" in caught.value.message


def test_unresolved_variables_and_include_cycles_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE", raising=False)
    job = tmp_path / "job.pull"
    job.write_text("job.name=j\nsource.class=org.apache.gobblin.source.extractor.extract.kafka.KafkaSimpleSource\n"
                   "kafka.brokers=${env:NOPE}\ndata.publisher.final.dir=${out.dir}\n")
    with pytest.raises(ConfigError) as caught:
        translate_file(job)
    message = caught.value.message
    assert "kafka.brokers (" in message and "environment variable NOPE is not set" in message
    assert "data.publisher.final.dir (" in message and "${out.dir} names no key of the job" in message
    (tmp_path / "a.inc").write_text("include=b.inc\n")
    (tmp_path / "b.inc").write_text("include=a.inc\n")
    job.write_text("include=a.inc\n")
    with pytest.raises(ConfigError, match=r"include cycle: .*a.inc → .*b.inc → .*a.inc"):
        translate_file(job)


def test_a_hocon_job_translates_as_its_properties_twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKERS", "127.0.0.1:9092")
    (tmp_path / "common.conf").write_text('writer.file.path.type = tablename\ndata.publisher.final.dir = "/out"\n')
    (tmp_path / "job.conf").write_text(
        'include "common.conf"\n'
        "job { name = hocon-job }\n"
        "source.class = org.apache.gobblin.source.extractor.extract.kafka.KafkaDeserializerSource\n"
        "kafka { brokers = ${BROKERS}, deserializer.type = STRING }\n"
        "topic.whitelist = [events, clicks]\n"
        "mr.job.max.mappers = 3\n")
    (tmp_path / "job.pull").write_text(
        "job.name=hocon-job\nsource.class=org.apache.gobblin.source.extractor.extract.kafka.KafkaDeserializerSource\n"
        "kafka.brokers=${env:BROKERS}\nkafka.deserializer.type=STRING\ntopic.whitelist=events,clicks\nmr.job.max.mappers=3\n"
        "writer.file.path.type=tablename\ndata.publisher.final.dir=/out\n")
    from_hocon, from_properties = translate_file(tmp_path / "job.conf"), translate_file(tmp_path / "job.pull")
    assert from_hocon.document == from_properties.document
    assert from_hocon.document["source"] == {
        "class": "kafka", "bootstrap_servers": ["127.0.0.1:9092"], "topics": ["events", "clicks"],
        "max_workunits": 3, "deserializer": "string"}
    (tmp_path / "bad.conf").write_text("job { name = \n")
    with pytest.raises(ConfigError, match=r"bad.conf: not valid HOCON"):
        translate_file(tmp_path / "bad.conf")
