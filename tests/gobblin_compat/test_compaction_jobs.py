"""A Gobblin compaction job file is recognised as one and refused as such: the compaction: settings that carry over
are shown for the ingestion job's file, and every key that does not is named with why."""

from __future__ import annotations

from pathlib import Path

from support.jobs import run_cli

MR_COMPACTOR = """job.name=EventCompaction
job.group=Compaction
compaction.datasets.finder=org.apache.gobblin.compaction.dataset.TimeBasedSubDirDatasetsFinder
compaction.input.dir=/data/tracking
compaction.dest.dir=/data/tracking-compacted
compaction.input.subdir=hourly
compaction.dest.subdir=daily
compaction.tmp.dest.dir=/tmp/compaction
compaction.job.runner.class=org.apache.gobblin.compaction.mapreduce.avro.MRCompactorAvroKeyDedupJobRunner
compaction.timebased.max.time.ago=3d
compaction.timebased.min.time.ago=1d12h
compaction.target.output.file.size=268435456
"""


def test_an_mr_compactor_job_is_refused_as_a_compaction_job_naming_what_is_not_carried_over(tmp_path: Path) -> None:
    job = tmp_path / "compaction.pull"
    job.write_text(MR_COMPACTOR)
    for command in ("validate", "convert"):
        result = run_cli(command, str(job), cwd=tmp_path)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and "source.class" not in result.stderr
        lines = result.stderr.splitlines()
        assert lines[1].startswith("  a Gobblin compaction job (compaction.* keys, MRCompactor runners, "
                                   "TimeBasedSubDirDatasetsFinder), not an ingestion job: gobblin-py compacts an ingestion "
                                   "job's published output with `gobblin-py compact INGESTION_JOB`")
        assert lines[2] == ("  what carries over, for the ingestion job's file: compaction: {older_than: 129600, "
                            "target_size: 268435456} (from compaction.timebased.min.time.ago (compaction.pull:11), in "
                            "seconds; from compaction.target.output.file.size (compaction.pull:12))")
        not_carried = [line.split(" (", 1)[0].removeprefix("  not carried over: ") for line in lines if "not carried over" in line]
        assert not_carried == ["compaction.datasets.finder", "compaction.input.dir", "compaction.dest.dir",
                               "compaction.input.subdir", "compaction.dest.subdir", "compaction.tmp.dest.dir",
                               "compaction.job.runner.class", "compaction.timebased.max.time.ago"]
        assert any("MRCompactorAvroKeyDedupJobRunner deduplicates whole records, gobblin-py by one key field "
                   "(compaction.dedup.key)" in line for line in lines)
    assert not (tmp_path / "compaction.yaml").exists()


def test_a_compaction_source_job_is_recognised_too(tmp_path: Path) -> None:
    job = tmp_path / "compaction.conf"
    job.write_text('source.class="org.apache.gobblin.compaction.source.CompactionSource"\n'
                   'compaction.suite.factory="org.apache.gobblin.compaction.suite.CompactionSuiteBaseFactory"\n')
    result = run_cli("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2
    assert "  a Gobblin compaction job (" in result.stderr and "source.class: required" not in result.stderr
    assert "  not carried over: source.class (compaction.conf): no gobblin-py compaction setting corresponds" in result.stderr
