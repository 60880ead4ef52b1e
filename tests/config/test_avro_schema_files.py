"""An Avro schema file a converter names is read and checked by `validate`, not first by a running task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

BROKEN = {
    "unknown type": ('{"type": "record", "name": "E", "fields": [{"name": "id", "type": "strng"}]}', "strng"),
    "truncated JSON": ('{"type": "record", "name": "E", "fields": [{"name": "id", ', "not a valid Avro schema"),
    "not a record": ('"string"', "must be a record"),
}


def _validate(job_file: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOBBLIN_PY_DEFAULTS"}
    return subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "validate", str(job_file)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("problem", list(BROKEN))
def test_validate_refuses_an_invalid_avro_schema_file_naming_it(tmp_path: Path, problem: str) -> None:
    text, words = BROKEN[problem]
    schema = tmp_path / "broken.avsc"
    schema.write_text(text, encoding="utf-8")
    (tmp_path / "data").mkdir()
    job = {
        "job": {"name": "t", "work_dir": str(tmp_path / "work")},
        "source": {"class": "files", "path": str(tmp_path / "data")},
        "converters": [{"class": "json_to_avro", "schema": str(schema)}],
        "writer": {"class": "avro"},
        "publisher": {"final_dir": str(tmp_path / "out")},
    }
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(job))
    proc = _validate(job_file)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "converters[0].schema" in proc.stderr and str(schema) in proc.stderr and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
