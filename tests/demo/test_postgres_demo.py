"""`gobblin-py demo postgres` works from a plain install: it starts PostgreSQL, fills its table, writes its own job
(nothing of the checkout's jobs/ or tests/), runs it once and every row is in the output exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.jobs import REPO

from gobblin_py.testing.outputs import read_avro_dir

pytestmark = pytest.mark.postgres


def test_the_postgres_demo_runs_its_job_once_from_a_directory_outside_the_checkout(tmp_path: Path) -> None:
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[demo]')")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GOBBLIN_PY_DEFAULTS")}
    env["PYTHONPATH"] = str(REPO)  # the package only: tests/support is not importable from the child
    done = subprocess.run([sys.executable, "-m", "gobblin_py.cli.main", "demo", "postgres", "--dir", "demo", "--once",
                           "--rows", "300"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "table orders: 300 orders" in done.stdout and "Warning" not in done.stderr
    assert any(line.split()[:4] == ["orders", "committed", "300", "300"] for line in done.stdout.splitlines()), done.stdout
    ids = Counter(r["id"] for r in read_avro_dir(tmp_path / "demo" / "output" / "orders"))
    assert len(ids) == 300 and set(ids.values()) == {1}
    job = (tmp_path / "demo" / "postgres-demo.yaml").read_text()
    assert "password_env: DEMO_PG_PASSWORD" in job


def test_as_root_a_data_directory_the_pgserver_user_cannot_enter_is_named_before_initdb(tmp_path: Path,
                                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Under root PostgreSQL runs as `pgserver`: a TMPDIR it cannot enter (e.g. under /root) gets the fix, not initdb's
    "permission denied"."""
    pytest.importorskip("pgserver", reason="needs pgserver (pip install -e '.[demo]')")
    if os.geteuid() != 0:
        pytest.skip("only root hands the server to the pgserver user")
    import tempfile

    from gobblin_py.demo.pg_server import LocalPostgres
    from gobblin_py.errors import ConfigError

    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(closed))
    with pytest.raises(ConfigError, match=r"pgserver, which cannot enter /\S* \(mode 700\) on the way to .*closed/gobblin-pg-.*chmod o\+x /\S* \(entering only.*--data-dir /tmp"):
        LocalPostgres()
    assert list(closed.iterdir()) == []  # nothing left behind
