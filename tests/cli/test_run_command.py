"""`gobblin-py run` as a user runs it: the example job from a fresh checkout, exit codes, the lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.jobs import REPO, on_spark, run_cli

from gobblin_py.state.lock import JobLock
from gobblin_py.testing.outputs import read_avro_dir, read_error_files


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the repository's jobs/ directory, as a user's working directory."""
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    return tmp_path


@pytest.mark.spark
def test_example_job_runs_then_ingests_nothing_then_only_a_new_file(checkout: Path) -> None:
    plain = (checkout / "jobs" / "example.yaml").read_text()
    on_spark(checkout / "jobs" / "example.yaml")  # the first run on Spark, however small
    first = run_cli("run", "jobs/example.yaml", cwd=checkout)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Traceback" not in first.stderr
    lines = first.stdout.strip().splitlines()
    assert lines[-1].startswith("SUCCEEDED job example run ")
    row = next(line.split() for line in lines if line.split()[:1] == ["clicks"])
    assert row[1:4] == ["committed", "2001", "2000"]
    assert len(read_avro_dir(checkout / "output")) == 2998
    assert len(read_error_files(checkout / "output")) == 4
    assert "INFO SparkContext" not in first.stderr and "INFO Executor" not in first.stderr  # Spark stays quiet
    for banner in ("Using incubator modules", "Setting default log level", "To adjust logging level"):  # the JVM's own lines
        assert banner not in first.stderr + first.stdout
    assert "Setting default log level" in (checkout / "work" / "logs" / "example" / "spark.log").read_text()

    (checkout / "jobs" / "example.yaml").write_text(plain)  # as shipped: a run this small stays in the driver
    second = run_cli("run", "jobs/example.yaml", cwd=checkout)
    assert second.returncode == 0
    assert second.stdout.count("no new data") == 2

    (checkout / "jobs" / "data" / "orders" / "orders-2026-01-06.csv").write_text(
        "id,ts,user,kind,amount,country\n900001,2026-01-06T10:00:00Z,u1,order,9.5,US\n900002,1767693600000,u2,order,,\n")
    third = run_cli("run", "jobs/example.yaml", "-v", cwd=checkout)
    assert third.returncode == 0, third.stdout + third.stderr
    row = next(line.split() for line in third.stdout.splitlines() if line.split()[:1] == ["orders"])
    assert row[1:4] == ["committed", "2", "2"]
    assert "running 1 task(s) in the driver, not on Spark" in third.stderr
    records = read_avro_dir(checkout / "output" / "orders" / "2026" / "01" / "06")
    assert sorted((r["id"], r["amount"]) for r in records) == [(900001, 9.5), (900002, None)]


def test_a_second_run_of_the_same_job_is_refused_while_the_first_holds_the_lock(checkout: Path) -> None:
    with JobLock(checkout / "work", "example"):
        result = run_cli("run", "jobs/example.yaml", cwd=checkout)
    assert result.returncode == 1
    assert "job 'example' is already running" in result.stderr and f"pid {os.getpid()}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (checkout / "output").exists()


def test_a_lock_left_by_a_killed_run_is_taken_over(checkout: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time, pathlib
        from gobblin_py.state.lock import JobLock
        with JobLock(pathlib.Path({str(checkout / 'work')!r}), "example"):
            print("locked", flush=True)
            time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    refused = run_cli("validate", "jobs/example.yaml", cwd=checkout)  # validate takes no lock
    assert refused.returncode == 0
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with JobLock(checkout / "work", "example"):
        pass  # acquired: the kernel released the dead holder's lock


def test_run_with_a_missing_job_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("run", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "nope.yaml: job file not found" in result.stderr and "Traceback" not in result.stderr


def test_every_command_has_help_with_an_example() -> None:
    import typer.main

    from gobblin_py.cli.main import app

    cli_page = (REPO / "docs" / "cli.md").read_text()

    def leaves(group, prefix):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from leaves(command, f"{prefix}{name} ")
            else:
                yield prefix + name, command

    found = list(leaves(typer.main.get_command(app), ""))
    assert {"run", "validate", "recover", "inspect-commits", "state show", "state reset", "history list", "history show"} <= {n for n, _ in found}
    for name, command in found:
        assert "Example: gobblin-py " + name in (command.help or ""), name
        assert f"gobblin-py {name}" in cli_page, f"docs/cli.md does not document `gobblin-py {name}`"


@pytest.mark.spark
def test_a_users_own_plugin_by_dotted_path_runs_on_spark_executors(tmp_path: Path) -> None:
    """A converter in a module beside the job file: importable on the executors, not only the driver."""
    (tmp_path / "jobdir").mkdir()
    (tmp_path / "jobdir" / "my_plugins.py").write_text(textwrap.dedent('''
        import os
        from gobblin_py.api import Converter, Settings

        class Tag(Converter):
            class Settings(Settings):
                field: str

            def convert_schema(self, schema):
                return schema

            def convert_record(self, record):
                return ({**record, self.settings.field: f"pid{os.getpid()}"},)
    '''))
    data = tmp_path / "data" / "events"
    data.mkdir(parents=True)
    (data / "a.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    (tmp_path / "jobdir" / "job.yaml").write_text(textwrap.dedent(f'''
        job: {{name: plug, work_dir: {tmp_path / "work"}}}
        source: {{class: files, path: {tmp_path / "data"}}}
        converters:
          - {{class: "my_plugins:Tag", field: worker}}
        writer: {{class: jsonl}}
        publisher: {{final_dir: {tmp_path / "out"}}}
        spark: {{master: "local[1]"}}
    '''))
    result = run_cli("run", str(tmp_path / "jobdir" / "job.yaml"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [out] = list((tmp_path / "out" / "events").glob("*.jsonl"))
    import orjson
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [r["id"] for r in rows] == [1, 2]
    worker_pid = rows[0]["worker"]
    assert worker_pid.startswith("pid") and worker_pid != "pid" and int(worker_pid[3:]) != os.getpid()


@pytest.mark.parametrize("command", [["validate", "job.yaml"], ["run", "job.yaml", "--in-process"], ["state", "show", "job.yaml"]])
def test_an_internal_error_is_one_line_and_exit_4_and_verbose_shows_the_traceback(tmp_path: Path, command: list[str]) -> None:
    bug = ("import sys, gobblin_py.config as c\n"
           "def boom(*a, **k): raise RuntimeError('a bug in the loader')\n"
           "c.load_job = boom\n"
           "sys.argv = ['gobblin-py', *sys.argv[1:]]\n"
           "from gobblin_py.cli.main import main; main()\n")
    quiet = subprocess.run([sys.executable, "-c", bug, *command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 4
    assert quiet.stderr.strip().splitlines() == ["error: internal error RuntimeError: a bug in the loader (run again with --verbose "
                                                 "for the traceback; committed state is consistent, pending commits are "
                                                 "recovered by the next run)"]
    if command[0] == "run":
        loud = subprocess.run([sys.executable, "-c", bug, *command, "--verbose"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert loud.returncode != 0 and "Traceback" in loud.stderr and "a bug in the loader" in loud.stderr


def test_version_short_help_and_an_example_on_every_group() -> None:
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("gobblin-py ")
    for group in ([], ["state"], ["history"]):
        short = run_cli(*group, "-h")
        assert short.returncode == 0 and "Example: gobblin-py " in short.stdout, (group, short.stdout + short.stderr)


def test_a_validation_message_has_no_pydantic_prefix_and_names_the_value_once(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("job: {name: t}\nsource: {class: files, path: /nonexistent/dir}\nwriter: {class: avro}\n"
                                       "publisher: {final_dir: out}\n")
    done = run_cli("validate", "job.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "  source.path: directory not found: /nonexistent/dir\n" in done.stderr and "Value error" not in done.stderr


def test_recover_all_with_nothing_pending_says_so_and_validate_counts_in_words(tmp_path: Path) -> None:
    from support.jobs import example_job, write_job

    write_job(tmp_path, example_job(tmp_path))
    nothing = run_cli("recover", "job.yaml", "--all", cwd=tmp_path)
    assert nothing.returncode == 0 and nothing.stdout.strip() == "job t: nothing pending"
    valid = run_cli("validate", "job.yaml", cwd=tmp_path)
    assert "(source files, 1 converter, 1 branch)" in valid.stdout


def test_a_library_error_is_named_once() -> None:
    from kafka.errors import KafkaTimeoutError

    from gobblin_py.errors import describe

    assert describe(KafkaTimeoutError("Failed to update metadata")) == "KafkaTimeoutError: Failed to update metadata"
    assert describe(ValueError("bad")) == "ValueError: bad"


@pytest.mark.spark
def test_ctrl_c_during_the_tasks_is_one_line_exit_130_a_cancelled_run_and_the_next_run_commits_everything(tmp_path: Path) -> None:
    from support.jobs import example_job, on_spark, write_job

    from gobblin_py.testing.crash import duplicates, snapshot

    job = example_job(tmp_path)
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:SlowConverter", "seconds_per_record": 0.004})
    on_spark(write_job(tmp_path, job))
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(p.is_file() for p in (tmp_path / "work" / "staging").rglob("*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before its tasks started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "py4j" not in err.lower() and "ERROR" not in err
    assert err.strip().splitlines()[-1].startswith("interrupted: ")
    assert "tasks: 4/4 done" not in err  # the bar never claims what did not happen
    history = json.loads(run_cli("history", "list", "job.yaml", "--json", cwd=tmp_path).stdout)
    assert [r["status"] for r in history] == ["cancelled"]
    shown = json.loads(run_cli("history", "show", "job.yaml", history[0]["run_id"], "--json", cwd=tmp_path).stdout)
    assert [t["status"] for t in shown["tasks"]] == ["cancelled"] * 4  # Spark returns no result of a cancelled job
    alerts = tmp_path / "work" / "state" / "t" / "alerts.json"
    assert not alerts.exists() or '"consecutive_failures": 0' in alerts.read_text().replace(" ", "").replace('"consecutive_failures":0', '"consecutive_failures": 0')
    job["converters"].pop(0)
    write_job(tmp_path, job)
    again = run_cli("run", "job.yaml", "--in-process", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    snap = snapshot(tmp_path / "output")
    assert sum(snap["records"].values()) == 2998 and duplicates(snap) == 0


def test_ctrl_c_in_a_pipeline_whose_reader_is_gone_is_a_cancelled_run_with_its_tasks(tmp_path: Path) -> None:
    """`gobblin-py run job.yaml 2>&1 | tee log` and Ctrl-C: tee dies first, the next line written hits a closed pipe.
    Before the fix that was "failed: internal error: BrokenPipeError" or exit 1 (counted for alerts), the event log
    said JobFailed, and `history show` listed no tasks."""
    from support.jobs import example_job, write_job

    from gobblin_py.state.events import EventLog

    job = example_job(tmp_path)  # small: its tasks run in the driver, one after another
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:SlowConverter", "seconds_per_record": 0.002})
    job["logging"] = {"level": "INFO"}  # its progress lines, as a cron log keeps them
    write_job(tmp_path, job)
    proc = subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", "run", "job.yaml"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        seen = b""
        while b"tasks: 0/4 done" not in seen:  # ten files, each dataset's JSON-lines ones packed: 4 tasks
            chunk = proc.stdout.read1(4096)
            assert chunk, seen.decode()
            seen += chunk
        time.sleep(2.5)  # the small CSV tasks done, the packed ones (~2-4 s) not
        proc.stdout.close()  # the reader of the pipeline is gone
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 130
    (run,) = json.loads(run_cli("history", "list", "job.yaml", "--json", cwd=tmp_path).stdout)
    assert run["status"] == "cancelled", run
    shown = json.loads(run_cli("history", "show", "job.yaml", run["run_id"], "--json", cwd=tmp_path).stdout)
    statuses = [t["status"] for t in shown["tasks"]]
    events = EventLog(tmp_path / "work", "t").read()
    finished = [e for e in events if e["name"] == "TaskFinished"]
    assert len(statuses) == 4 and "cancelled" in statuses and set(statuses) <= {"succeeded", "cancelled"}, statuses
    assert statuses.count("succeeded") == len(finished)  # each task as it really ended
    assert events[-1]["name"] == "JobCancelled"
    assert not (tmp_path / "work" / "state" / "t" / "alerts.json").exists() or \
        '"consecutive_failures": 0' in (tmp_path / "work" / "state" / "t" / "alerts.json").read_text()
