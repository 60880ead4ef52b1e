"""Consecutive-failure alerts through a real SMTP server on 127.0.0.1 and through a command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.jobs import example_job, write_job

from gobblin_py.config import load_job
from gobblin_py.runtime.executors.in_process import InProcessExecutor
from gobblin_py.runtime.runner import JobRunner
from gobblin_py.state.events import EventLog


@pytest.fixture
def smtp_server():
    from aiosmtpd.controller import Controller
    from support.kafka_broker import free_port

    class Inbox:
        def __init__(self) -> None:
            self.messages: list[tuple[str, list[str], str]] = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content.decode()))
            return "250 OK"

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


def _run(tmp: Path, job: dict) -> bool:
    spec = load_job(write_job(tmp, job))
    return JobRunner(spec, InProcessExecutor()).run().succeeded


def test_an_alert_after_n_failed_runs_and_one_when_the_job_recovers(tmp_path: Path, smtp_server) -> None:
    controller, inbox = smtp_server
    marker = tmp_path / "command-alerts.jsonl"
    command = [sys.executable, "-c", "import json, os; open(os.environ['OUT'], 'a').write(json.dumps({k: v for k, v in os.environ.items() "
               "if k.startswith('GOBBLIN_PY_')}) + '\\n')"]
    alert = {"after_failures": 2, "email": {"host": "127.0.0.1", "port": controller.port, "from": "gobblin@example.test",
                                             "to": ["oncall@example.test"], "starttls": False}, "command": command}
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "max_task_retries": 0, "alert": alert})
    job["source"]["pack_bytes"] = 0  # a unit a file, so the fault below picks one by its id
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 99,
                                 "only_workunit_containing": "clicks-2026-01-03"})
    import os
    os.environ["OUT"] = str(marker)
    try:
        assert not _run(tmp_path, job)
        assert inbox.messages == []                   # one failure: below the threshold
        assert not _run(tmp_path, job)
        assert len(inbox.messages) == 1               # the second in a row: one alert
        sender, to, content = inbox.messages[0]
        assert sender == "gobblin@example.test" and to == ["oncall@example.test"]
        assert "Subject: gobblin-py job t failed 2 runs in a row" in content and "injected failure" in content
        assert not _run(tmp_path, job)
        assert len(inbox.messages) == 1               # still failing: no repeat
        job["converters"].pop(0)
        assert _run(tmp_path, job)
        assert len(inbox.messages) == 2 and "Subject: gobblin-py job t succeeded again" in inbox.messages[1][2]
    finally:
        del os.environ["OUT"]
    calls = [json.loads(line) for line in marker.read_text().splitlines()]
    assert [c["GOBBLIN_PY_ALERT"] for c in calls] == ["failing", "recovered"]
    assert calls[0]["GOBBLIN_PY_JOB"] == "t" and calls[0]["GOBBLIN_PY_CONSECUTIVE_FAILURES"] == "2"
    assert "injected failure" in calls[0]["GOBBLIN_PY_ERROR"] and calls[0]["GOBBLIN_PY_RUN_ID"]
    assert [e["metadata"]["alert"] for e in EventLog(tmp_path / "work", "t").read() if e["name"] == "AlertSent"] == ["failing", "recovered"]


def test_an_unreachable_smtp_server_does_not_change_the_outcome(tmp_path: Path, caplog) -> None:
    from support.kafka_broker import free_port

    port = free_port()
    alert = {"after_failures": 1, "email": {"host": "127.0.0.1", "port": port, "from": "a@example.test", "to": ["b@example.test"]}}
    job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "max_task_retries": 0, "alert": alert})
    job["source"]["pack_bytes"] = 0  # a unit a file, so the fault below picks one by its id
    job["converters"].insert(0, {"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 99})
    assert not _run(tmp_path, job)
    assert f"could not send the alert email through 127.0.0.1:{port}" in caplog.text


def test_starttls_is_required_unless_turned_off_and_no_password_goes_in_clear(tmp_path: Path, caplog, monkeypatch) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult
    from support.kafka_broker import free_port

    logins: list[str] = []
    inbox: list[bytes] = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            inbox.append(envelope.content)
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        logins.append(auth_data.password.decode())
        return AuthResult(success=True)

    controller = Controller(Handler(), hostname="127.0.0.1", port=free_port(), authenticator=authenticator,
                            auth_require_tls=False)  # a server that takes a password in clear, and offers no STARTTLS
    controller.start()
    try:
        monkeypatch.setenv("SMTP_PASSWORD", "s3cret")
        email = {"host": "127.0.0.1", "port": controller.port, "from": "a@example.test", "to": ["b@example.test"],
                 "username": "gobblin", "password_env": "SMTP_PASSWORD"}
        job = example_job(tmp_path, job={"name": "t", "work_dir": str(tmp_path / "work"), "max_task_retries": 0,
                                         "alert": {"after_failures": 1, "email": email}})
        job["converters"].insert(0, {"class": "gobblin_py.testing.faults:FlakyConverter", "fail_attempts": 99})
        assert not _run(tmp_path, job)
        assert logins == [] and inbox == []        # the default (starttls: true) refuses this server
        assert f"127.0.0.1:{controller.port} does not offer STARTTLS; nothing was sent" in caplog.text
        assert "s3cret" not in caplog.text
    finally:
        controller.stop()
