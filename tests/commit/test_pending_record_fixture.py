"""A pending commit record written by the build before typed splits (main at fbb788d) recovers on this build.

The fixture is a real work directory: the example job (files → Avro → `fs`), killed by SIGKILL after the second step of
clicks' commit sequence, its paths replaced by @ROOT@ (the error files keep the paths they were written with: their
checksums are in the record). Orders had no record yet: the next run plans it again.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import yaml
from support.jobs import EVENT_SCHEMA, EXAMPLE_DATA

from gobblin_py import checked_json
from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.store import StateStore
from gobblin_py.testing.outputs import read_avro_dir

FIXTURE = Path(__file__).parent / "fixtures" / "pending_files_example"


def _job(root: Path) -> Path:
    job = {"job": {"name": "t", "work_dir": str(root / "work"), "max_task_retries": 1, "commit_parallelism": 1},
           "source": {"class": "files", "path": str(root / "data")},
           "converters": [{"class": "json_to_avro", "schema": str(EVENT_SCHEMA)}],
           "quality": {"row": [{"class": "required_fields", "type": "ERR_FILE", "fields": ["id", "ts"]}]},
           "writer": {"class": "avro", "codec": "deflate",
                      "partition": {"column": "ts", "granularity": "DAY", "pattern": "yyyy/MM/dd"}},
           "publisher": {"final_dir": str(root / "output")}}
    shutil.copytree(EXAMPLE_DATA, root / "data")
    path = root / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def _published(root: Path) -> Counter:
    return Counter((r["_file"].split("/", 1)[0], r["id"]) for r in read_avro_dir(root / "output"))


def _unpack_fixture(root: Path) -> None:
    shutil.copytree(FIXTURE, root)
    for path in [p for p in root.rglob("*") if p.is_file() and "@ROOT@" in p.read_text(errors="replace")]:
        text = path.read_text().replace("@ROOT@", str(root))
        data = json.loads(text)
        if isinstance(data, dict) and {"format", "checksum", "body"} <= set(data):
            checked_json.write(path, data["body"])  # a checksummed record: its checksum covers the paths
        else:
            path.write_text(text)


def test_a_pending_record_of_the_build_before_typed_splits_recovers_and_every_record_is_published_once(
        tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    assert JobRunner(load_job(_job(reference)), InProcessExecutor()).run().succeeded
    want = _published(reference)
    assert want and {d for d, _ in want} == {"clicks", "orders"}

    root = tmp_path / "pending"
    _unpack_fixture(root)
    record = root / "work" / "commits" / "t" / "clicks.json"
    assert [s["type"] for s in json.loads(record.read_text())["body"]["steps"]][:2] == ["fs_rename", "fs_rename"]
    assert len(read_avro_dir(root / "output")) > 0, "the killed run had published part of clicks"
    result = JobRunner(load_job(_job(root)), InProcessExecutor()).run()
    assert result.succeeded, result.error
    assert not record.exists()
    assert _published(root) == want  # every record once: the old record's files, then orders planned again
    assert StateStore(root / "work", "t").watermarks() == StateStore(reference / "work", "t").watermarks()
