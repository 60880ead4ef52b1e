"""Consecutive-failure alerts (Gobblin's job failure alerting): email through SMTP and/or a command.

The count of consecutive failed runs is kept in the state store; one alert goes out when it reaches
`job.alert.after_failures`, and one more when the job succeeds again. An alert that cannot be sent is
logged; it never changes the run's outcome.
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from gobblin_py import checked_json
from gobblin_py.api.plugin import Settings
from gobblin_py.errors import StateStoreError
from gobblin_py.fs.records import read_record, record_files

log = logging.getLogger(__name__)


class EmailAlert(Settings):
    host: str = Field(description="the SMTP server")
    port: int = Field(default=25, ge=1, le=65535, description="the SMTP server's port")
    from_: str = Field(alias="from", description="the sender's address")
    to: list[str] = Field(min_length=1, description="the recipients' addresses")
    username: str | None = Field(default=None, description="the SMTP login (the password: password_env)")
    password_env: str | None = Field(default=None, description="name of the environment variable holding the password")
    starttls: bool = Field(default=True, description="require STARTTLS: a server that does not offer it gets nothing, "
                                                      "no password and no message (false: send in clear, for a trusted relay)")

    model_config = Settings.model_config | {"populate_by_name": True}


class AlertSettings(Settings):
    after_failures: int = Field(default=3, ge=1, description="consecutive failed runs before one alert (and one more when the job succeeds again)")
    email: EmailAlert | None = Field(default=None, description="send the alert by email (smtplib)")
    command: str | list[str] | None = Field(
        default=None, description="run this command with GOBBLIN_PY_JOB, GOBBLIN_PY_RUN_ID, GOBBLIN_PY_ALERT (failing / recovered), "
        "GOBBLIN_PY_CONSECUTIVE_FAILURES and GOBBLIN_PY_ERROR in its environment")


class FailureTracker:
    """Counts a job's consecutive failed runs in `<state>/alerts.json` and alerts on the thresholds."""

    def __init__(self, state_dir: str | Path, job: str, settings: AlertSettings | None) -> None:
        self.files = record_files(state_dir)
        self.path = self.files.locate("alerts.json")
        self.job = job
        self.settings = settings or AlertSettings()

    def _read(self) -> dict[str, Any]:
        found = read_record(self.files, "alerts.json", StateStoreError, "alert state file")
        return {"consecutive_failures": 0, "alerted": False} if found is None else found[0]

    def consecutive_failures(self) -> int:
        """Failed runs in a row until now (0 after a success, and before the first run)."""
        return int(self._read().get("consecutive_failures", 0))

    def record(self, run_id: str, succeeded: bool, error: str | None) -> str | None:
        """Count this run; returns "failing" or "recovered" when an alert went out."""
        state = self._read()
        kind = None
        if succeeded:
            if state.get("alerted"):
                kind = "recovered"
            state = {"consecutive_failures": 0, "alerted": False}
        else:
            state["consecutive_failures"] = state.get("consecutive_failures", 0) + 1
            if state["consecutive_failures"] == self.settings.after_failures:
                kind = "failing"
                state["alerted"] = True
        self.files.put("alerts.json", checked_json.encode(state))
        if kind is not None and (self.settings.email or self.settings.command):
            self._send(kind, run_id, state["consecutive_failures"], error)
        return kind

    def _send(self, kind: str, run_id: str, failures: int, error: str | None) -> None:
        subject = (f"gobblin-py job {self.job} failed {failures} runs in a row" if kind == "failing"
                   else f"gobblin-py job {self.job} succeeded again")
        body = f"job: {self.job}\nrun: {run_id}\nhost: {socket.gethostname()}\n" + (f"error: {error}\n" if error else "")
        if self.settings.email is not None:
            import smtplib  # here: smtplib, ssl and email cost every command's start ~15 ms, and only an alert needs them

            try:
                _email(self.settings.email, subject, body)
                log.info("alert sent to %s: %s", ", ".join(self.settings.email.to), subject)
            except (OSError, smtplib.SMTPException) as exc:
                log.error("could not send the alert email through %s:%d: %s", self.settings.email.host, self.settings.email.port, exc)
        if self.settings.command:
            cmd = shlex.split(self.settings.command) if isinstance(self.settings.command, str) else list(self.settings.command)
            env = {**os.environ, "GOBBLIN_PY_JOB": self.job, "GOBBLIN_PY_RUN_ID": run_id, "GOBBLIN_PY_ALERT": kind,
                   "GOBBLIN_PY_CONSECUTIVE_FAILURES": str(failures), "GOBBLIN_PY_ERROR": error or ""}
            try:
                done = subprocess.run(cmd, env=env, timeout=60, capture_output=True)
                if done.returncode != 0:
                    log.error("alert command %s exited %d: %s", cmd[0], done.returncode, done.stderr.decode(errors="replace")[-500:])
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.error("could not run the alert command %s: %s", cmd[0], exc)


def _email(settings: EmailAlert, subject: str, body: str) -> None:
    import smtplib
    import ssl
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = settings.from_, ", ".join(settings.to), subject
    msg.set_content(body)
    with smtplib.SMTP(settings.host, settings.port, timeout=15) as smtp:
        smtp.ehlo()
        if settings.starttls:
            if not smtp.has_extn("starttls"):
                raise smtplib.SMTPNotSupportedError(
                    f"{settings.host}:{settings.port} does not offer STARTTLS; nothing was sent (no password, no message). "
                    "Use a server with STARTTLS, or set job.alert.email.starttls: false for a trusted relay")
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
        if settings.username:
            smtp.login(settings.username, os.environ.get(settings.password_env or "", ""))
        smtp.send_message(msg)
