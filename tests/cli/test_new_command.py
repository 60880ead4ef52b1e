"""`gobblin-py new`: one's own CSV file to a committed Parquet table, as a user does it, in a job that shares no state."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from support.jobs import REPO, run_cli

CSV = "id,ts,customer,amount,paid\n" + "".join(
    f"{i},2026-03-0{1 + i % 5}T10:00:00Z,c{i % 7},{i * 1.5},{'true' if i % 2 else 'false'}\n" for i in range(1, 301))


def test_own_csv_file_from_new_to_a_committed_parquet_table(tmp_path: Path) -> None:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")  # a checkout's jobs/, the example's state already there
    assert run_cli("run", "jobs/example.yaml", "--in-process", cwd=tmp_path).returncode == 0
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "sales.csv").write_text(CSV)

    made = run_cli("new", "sales", "--from", "exports/sales.csv", cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "wrote jobs/sales.yaml" in made.stdout and "5 fields inferred from 300 records" in made.stdout
    assert made.stdout.rstrip().splitlines()[-2:] == [
        "  gobblin-py plan jobs/sales.yaml    # what a run would read",
        "  gobblin-py run jobs/sales.yaml     # read it, publish it exactly once"]
    job = yaml.safe_load((tmp_path / "jobs" / "sales.yaml").read_text())
    assert job["job"] == {"name": "sales", "work_dir": "./work/sales"}
    assert job["converters"] == [{"class": "json_to_avro", "schema": "jobs/schemas/sales.avsc"}]

    for command in made.stdout.rstrip().splitlines()[-2:]:  # the two next commands, as printed
        done = run_cli(*command.split("#")[0].split()[1:], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "sales    committed        300      300" in done.stdout
    assert "not in the source" not in done.stdout and "was last run from" not in done.stderr  # its own state
    table = pq.read_table(tmp_path / "output" / "sales")  # read by pyarrow, not by us
    assert sorted(table.column("id").to_pylist()) == list(range(1, 301))
    assert table.schema.field("paid").type == "bool" and table.schema.field("amount").type == "double"

    again = run_cli("new", "sales", "--from", "exports/sales.csv", cwd=tmp_path)
    assert again.returncode == 2 and "jobs/sales.yaml exists; pass --force" in again.stderr
    assert "Traceback" not in again.stderr


def test_a_directory_of_datasets_says_it_merged_them_and_which_fields_that_made_nullable(tmp_path: Path) -> None:
    for dataset, rows in (("a", '{"id": 1, "name": "x"}\n{"id": 2, "name": "y"}\n'), ("b", '{"id": 3, "size": 4}\n')):
        (tmp_path / "in" / dataset).mkdir(parents=True)
        (tmp_path / "in" / dataset / "part.jsonl").write_text(rows)
    made = run_cli("new", "both", "--from", "in", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert ("merged the samples of 2 datasets (a, b) into one schema: 2 field(s) became nullable as some dataset lacks "
            "them (name, size); one dataset's alone: --dataset NAME") in made.stderr
    done = run_cli("run", "jobs/both.yaml", "--in-process", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    table = pq.read_table(tmp_path / "output" / "both")
    assert sorted(table.column("id").to_pylist()) == [1, 2, 3]


def test_what_new_cannot_read_is_named(tmp_path: Path) -> None:
    missing = run_cli("new", "x", "--from", "nowhere/at-all.csv", cwd=tmp_path)
    assert missing.returncode == 2 and "--from nowhere/at-all.csv: no such file or directory" in missing.stderr
    table = run_cli("new", "x", "--from", "postgresql://127.0.0.1/db", cwd=tmp_path)
    assert table.returncode == 2 and "docs/sources/jdbc.md" in table.stderr
    bad = run_cli("new", "../x", "--from", ".", cwd=tmp_path)
    assert bad.returncode == 2 and "job name '../x'" in bad.stderr
    assert not (tmp_path / "jobs").exists()


def test_on_a_base_install_without_pyarrow_new_writes_an_avro_job_that_runs(tmp_path: Path) -> None:
    """README's first command installs no extras; `new` there wrote a Parquet job that its own validation refused
    ("the parquet writer needs pyarrow"). Without pyarrow it now writes Avro, says so, and the job runs."""
    import os

    import fastavro

    blocked = tmp_path / "blocked"
    (blocked / "pyarrow").mkdir(parents=True)
    (blocked / "pyarrow" / "__init__.py").write_text("raise ImportError('pyarrow is not installed here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocked), str(REPO)])}
    (tmp_path / "sales.csv").write_text(CSV)
    beside = run_cli("new", "sales", "--from", "sales.csv", cwd=tmp_path, env=env)  # where ./work and ./output go
    assert beside.returncode == 2 and "mkdir data && mv sales.csv data/" in beside.stderr, beside.stderr
    assert not (tmp_path / "jobs" / "sales.yaml").exists()
    (tmp_path / "data").mkdir()
    (tmp_path / "sales.csv").rename(tmp_path / "data" / "sales.csv")
    made = run_cli("new", "sales", "--from", "data/sales.csv", cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "writer: avro, as pyarrow is not installed here" in made.stderr
    done = run_cli("run", "jobs/sales.yaml", "--in-process", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [r["id"] for f in sorted((tmp_path / "output" / "sales").rglob("*.avro")) for r in fastavro.reader(f.open("rb"))]
    assert sorted(ids) == list(range(1, 301))
