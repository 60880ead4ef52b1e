"""A directory of job files with real runs for the status page: one that succeeded (configured with secrets), one
that fails, one with a pending commit and one whose commit is quarantined; and the real server over it on a free
127.0.0.1 port, in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.jobs import example_job, write_job

from gobblin_py.testing.crash import SIGKILLED, cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SMTP_PASSWORD = "smtp-pw-Zq81xK3v"  # the alert email's password, through password_env
SMTP_USER = "smtp-user-9Hc2Lw"      # the alert email's login, through ${VAR} in the job file
SECRETS = [SMTP_PASSWORD, SMTP_USER]
TOKEN = "test-token-0123456789abcdef"


class UNREAD:
    """One orders file of ok's that no run has read yet: its lag is 1 file of `size` bytes."""

    rel = Path("ok/data/orders/orders-2026-02-01.csv")
    text = "id,ts,user,kind\n" + "".join(f"{800000 + i},2026-02-01T10:00:{i:02d}Z,u{i},buy\n" for i in range(40))
    size = len(text.encode())

    @classmethod
    def write(cls, root: Path) -> None:
        (root / cls.rel).write_text(cls.text)


def _job(root: Path, name: str, **job_keys: object) -> Path:
    """The example job named `name`, its data, output and work directory under `root/name`."""
    home = root / name
    home.mkdir()
    (root / "jobs").mkdir(exist_ok=True)
    spec = example_job(home, job={"name": name, "work_dir": str(home / "work"), "commit_parallelism": 1, **job_keys})
    return write_job(root / "jobs", spec, f"{name}.yaml")


class STREAM:
    """jobs/stream.yaml reads a topic of the test broker: 2 partitions of 20 events read, then `waiting` more produced."""

    topic = "status-stream"  # the session's broker is fresh; no other test names this topic
    waiting = {0: 4, 1: 3}


@pytest.fixture(scope="session")
def jobs_dir(tmp_path_factory: pytest.TempPathFactory, broker: Any) -> Path:
    """jobs/ok.yaml succeeded twice; jobs/broken.yaml failed; jobs/waiting.yaml has two pending commits (its run killed
    mid-commit, once its commit thread wrote both datasets' records in one batch); jobs/stuck.yaml has a commit quarantined after 3 failed attempts; jobs/stream.yaml reads Kafka and
    has records waiting."""
    import os

    from support.kafka_jobs import events, kafka_job, new_topic, produce_events

    os.environ["GOBBLIN_TEST_SMTP_PASSWORD"] = SMTP_PASSWORD
    os.environ["GOBBLIN_TEST_SMTP_USER"] = SMTP_USER
    root = tmp_path_factory.mktemp("status")
    _job(root, "ok", schedule="0 0/15 * * * ?", alert={"after_failures": 3, "email": {
        "host": "127.0.0.1", "port": 2525, "from": "g@example.com", "to": ["oncall@example.com"],
        "username": "${GOBBLIN_TEST_SMTP_USER}", "password_env": "GOBBLIN_TEST_SMTP_PASSWORD"}})
    _job(root, "broken")
    _job(root, "waiting")
    _job(root, "stuck", commit_retry_backoff=0)
    (root / "broken" / "data" / "clicks" / "gone.jsonl").symlink_to(root / "broken" / "nowhere.jsonl")
    run = ["run", "--in-process", "--quiet"]
    assert cli([*run, "jobs/ok.yaml"], root).returncode == 0
    (root / "ok" / "data" / "clicks" / "more.jsonl").write_text(
        "".join(json.dumps({"id": 900000 + i, "ts": 1767312000000 + i, "user": "u1", "kind": "click"}) + "\n" for i in range(50)))
    assert cli([*run, "jobs/ok.yaml"], root).returncode == 0
    UNREAD.write(root)  # arrived after the last run: the lag the page shows
    assert cli([*run, "jobs/broken.yaml"], root).returncode == 1
    assert cli([*run, "jobs/waiting.yaml"], root, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    assert cli([*run, "jobs/stuck.yaml"], root, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    record = json.loads((root / "stuck" / "work" / "commits" / "stuck" / "clicks.json").read_text())
    Path(record["body"]["steps"][2]["args"]["src"]).unlink()  # its third step can never be done: quarantined after 3
    for _ in range(3):
        assert cli([*run, "jobs/stuck.yaml"], root).returncode == 1
    new_topic(broker.bootstrap, STREAM.topic, 2, 20)
    (root / "stream").mkdir()
    spec = kafka_job(root / "stream", broker.bootstrap, [STREAM.topic])
    spec["job"]["name"] = "stream"
    write_job(root / "jobs", spec, "stream.yaml")
    assert cli([*run, "jobs/stream.yaml"], root).returncode == 0
    produce_events(broker.bootstrap, STREAM.topic, {p: events(n) for p, n in STREAM.waiting.items()})
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """The real server (uvicorn) in a thread, on a free 127.0.0.1 port; `stop()` ends it."""

    def __init__(self, paths: list[Path], token: str | None = None) -> None:
        import uvicorn

        from gobblin_py.cli.prometheus import last_runs_text
        from gobblin_py.operating.server.app import Jobs, create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(Jobs(paths), metrics=last_runs_text, token=token, follow_poll_s=0.2)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, name="status-server", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def served(jobs_dir: Path) -> Iterator[Served]:
    server = Served([jobs_dir / "jobs"])
    yield server
    server.stop()
