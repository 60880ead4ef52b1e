"""The status page's JSON API on the real server: it agrees with `history`, `state show` and `inspect-commits` (and
`status --json` with it) on the same work dirs, serves no secret, and is read-only unless given a token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from operating.conftest import SECRETS, STREAM, TOKEN, UNREAD, Served, _job

from gobblin_py.testing.crash import SIGKILLED, cli

JOBS = ["ok", "broken", "waiting", "stuck", "stream"]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, method="POST", data=b"")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def api(served: Served, path: str) -> Any:
    status, body = get(served.url + path)
    assert status == 200, body
    return json.loads(body)


def _cli_json(args: list[str], cwd: Path) -> Any:
    done = cli(args, cwd)
    assert done.returncode in (0, 1, 3), done.stderr
    return json.loads(done.stdout)


def _without_ages(value: Any) -> Any:
    """`value` without what moves with the clock between two reads: lag ages (`seconds`, a waiting record's age
    grows) and a schedule's next firing (a cron boundary may pass)."""
    if isinstance(value, dict):
        return {k: _without_ages(v) for k, v in value.items() if k not in ("seconds", "next_fire")}
    if isinstance(value, list):
        return [_without_ages(v) for v in value]
    return value


def test_the_api_agrees_with_history_state_show_and_inspect_commits(served: Served, jobs_dir: Path) -> None:
    jobs = {j["name"]: j for j in api(served, "/api/jobs")}
    assert sorted(jobs) == sorted(JOBS)
    for name in JOBS:
        job_file = f"jobs/{name}.yaml"
        runs = api(served, f"/api/jobs/{name}/runs")
        assert runs == _cli_json(["history", "list", job_file, "--json", "--limit", "1000"], jobs_dir)
        assert runs, name  # every job of the fixture ran (the waiting one was killed mid-commit: its record says so)
        shown = _cli_json(["history", "show", job_file, runs[0]["run_id"], "--json"], jobs_dir)
        detail = api(served, f"/api/jobs/{name}/runs/{runs[0]['run_id']}")
        assert {k: v for k, v in detail.items() if k != "error_files"} == shown
        assert jobs[name]["last_run"]["run_id"] == runs[0]["run_id"] and jobs[name]["last_run"]["status"] == runs[0]["status"]
        state = _cli_json(["state", "show", job_file, "--json"], jobs_dir)
        datasets = {d["dataset"]: d for d in api(served, f"/api/jobs/{name}/datasets")}
        assert {d: {"watermarks": v["watermarks"], "state": v["state"]} for d, v in datasets.items() if v["state"] or v["watermarks"]} == state
        pending = _cli_json(["inspect-commits", job_file, "--json"], jobs_dir)
        commits = api(served, f"/api/jobs/{name}/commits")
        assert [{k: v for k, v in c.items() if k != "quarantined"} for c in commits] == pending
        assert jobs[name]["pending"] == [c["dataset"] for c in pending]
        now = {j["name"]: j for j in api(served, "/api/jobs")}[name]  # read beside it, not 30 s of CLI calls before
        assert _without_ages(api(served, f"/api/jobs/{name}")) == _without_ages(now)
    assert jobs["ok"]["health"] == "ok" and jobs["ok"]["attention"] == [] and len(api(served, "/api/jobs/ok/runs")) == 2
    assert jobs["ok"]["schedule"] == "0 0/15 * * * ?" and jobs["ok"]["next_fire"][14:19] in ("00:00", "15:00", "30:00", "45:00")
    assert jobs["broken"]["failing_streak"] == 1 and jobs["broken"]["last_run"]["status"] == "failed"
    # killed after its commit thread wrote both datasets' records, in one batch, before any step
    assert jobs["waiting"]["pending"] == ["clicks", "orders"] and jobs["waiting"]["quarantined"] == []
    assert any(r.startswith("pending commits: clicks") for r in jobs["waiting"]["attention"])
    assert jobs["waiting"]["last_run"]["status"] == "killed" and "last run killed" in jobs["waiting"]["attention"]
    assert jobs["stuck"]["quarantined"] == ["clicks"] and jobs["stuck"]["failing_streak"] == 3
    lag = {entry["dataset"]: entry for entry in api(served, "/api/jobs/ok/lag")}
    assert set(lag) == {"clicks", "orders"}
    assert (lag["orders"]["files"], lag["orders"]["bytes"], lag["orders"]["error"]) == (1, UNREAD.size, None)
    assert (lag["clicks"]["files"], lag["clicks"]["bytes"]) == (0, 0)
    [stream] = api(served, "/api/jobs/stream/lag")  # Kafka: end offsets − committed, per partition, and the age
    assert (stream["dataset"], stream["records"], stream["unit"]) == (STREAM.topic, sum(STREAM.waiting.values()), "records")
    assert {p["name"]: p["records"] for p in stream["partitions"]} == {f"{STREAM.topic}-{p}": n for p, n in STREAM.waiting.items()}
    assert stream["seconds"] is not None and 0 <= stream["seconds"] < 600
    assert jobs["stream"]["health"] == "ok"


def _timeless(value: Any) -> Any:
    """`value` without the lag's ages: a record waiting is older at each of two measurements."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_status_json_is_what_the_api_serves(served: Served, jobs_dir: Path) -> None:
    done = cli(["status", str(jobs_dir / "jobs"), "--json"], jobs_dir)  # the path as the server was given it
    assert done.returncode == 1, done.stderr  # three of the jobs need a person
    assert _timeless(json.loads(done.stdout)) == _timeless(api(served, "/api/jobs"))
    table = cli(["status", "jobs/ok.yaml", "jobs/stuck.yaml"], jobs_dir)
    assert table.returncode == 1 and "✖ 1 quarantined" in table.stdout and "stuck: quarantined commits: clicks" in table.stdout
    assert cli(["status", "jobs/ok.yaml"], jobs_dir).returncode == 0


def test_a_run_shows_its_bad_records_and_an_unknown_run_or_job_is_404(served: Served) -> None:
    run = api(served, "/api/jobs/ok/runs")[-1]["run_id"]
    detail = api(served, f"/api/jobs/ok/runs/{run}")
    assert sum(sum(e["rejected"].values()) for e in detail["error_files"]) == 4
    assert all(e["first_lines"] and json.loads(e["first_lines"][0])["reason"] for e in detail["error_files"])
    assert get(served.url + "/api/jobs/ok/runs/nope")[0] == 404
    assert get(served.url + "/api/jobs/nope")[0] == 404
    assert get(served.url + "/jobs/nope")[0] == 404


def test_the_job_page_names_who_holds_the_lease(served: Served) -> None:
    lease = api(served, "/api/jobs/ok")["lease"]
    assert lease is not None and lease["state"] == "released", lease  # its last run released it
    code, page = get(served.url + "/jobs/ok")
    assert code == 200
    text = page.decode()
    assert f"lease: epoch {lease['epoch']}, released" in text and f"by run {lease['run_id']}" in text, text


def test_openapi_metrics_and_the_event_stream(served: Served) -> None:
    spec = api(served, "/api/openapi.json")
    assert {"/api/jobs", "/api/jobs/{job}/runs", "/api/jobs/{job}/runs/{run}", "/api/jobs/{job}/datasets",
            "/api/jobs/{job}/commits", "/api/jobs/{job}/lag", "/api/jobs/{job}/events"} <= set(spec["paths"])
    status, body = get(served.url + "/metrics")
    assert status == 200 and b'gobblin_py_run_succeeded{job="ok"} 1.0' in body and b'gobblin_py_run_succeeded{job="broken"} 0.0' in body
    assert b'gobblin_py_dataset_lag_files{dataset="orders",job="ok"} 1.0' in body
    assert f'gobblin_py_dataset_lag_bytes{{dataset="orders",job="ok"}} {float(UNREAD.size)}'.encode() in body
    with urllib.request.urlopen(served.url + "/api/jobs/ok/events", timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = [stream.readline() for _ in range(6)]
    events = [json.loads(line[6:]) for line in lines if line.startswith(b"data: ")]
    assert events and all(e["metadata"]["job"] == "ok" for e in events)


def test_no_response_holds_a_secret(served: Served) -> None:
    paths = ["/", "/metrics", "/api/openapi.json", "/api/jobs"]
    for name in JOBS:
        paths += [f"/jobs/{name}", f"/api/jobs/{name}", f"/api/jobs/{name}/runs", f"/api/jobs/{name}/datasets",
                  f"/api/jobs/{name}/commits", f"/api/jobs/{name}/lag"]
        for run in api(served, f"/api/jobs/{name}/runs"):
            paths += [f"/api/jobs/{name}/runs/{run['run_id']}", f"/jobs/{name}/runs/{run['run_id']}"]
    for path in paths:
        status, body = get(served.url + path)
        assert status == 200, path
        leaked = [s[:4] for s in SECRETS if s.encode() in body]
        assert not leaked, f"{path} serves a secret ({leaked})"


def test_actions_are_refused_without_the_flag_and_the_token(served: Served, tmp_path: Path) -> None:
    assert post(served.url + "/api/jobs/waiting/recover") == 403
    assert post(served.url + "/api/jobs/waiting/recover", TOKEN) == 403  # read-only: no token opens it
    job_file = _job(tmp_path, "mine")
    assert cli(["run", "--in-process", str(job_file)], tmp_path, crash_at="commit.after_store_write:1").returncode == SIGKILLED
    armed = Served([job_file], token=TOKEN)
    try:
        assert post(armed.url + "/api/jobs/mine/recover") == 403
        assert post(armed.url + "/api/jobs/mine/recover", "wrong-" + TOKEN) == 403
        assert api(armed, "/api/jobs/mine/commits") != []
        assert post(armed.url + "/api/jobs/mine/recover", TOKEN) == 200
        assert api(armed, "/api/jobs/mine/commits") == []  # replayed
    finally:
        armed.stop()


@pytest.mark.parametrize("args, message", [
    (["--allow-actions"], "--allow-actions needs --token-env VAR"),
    (["--allow-actions", "--token-env", "GOBBLIN_TEST_NO_SUCH_TOKEN"], "unset or shorter than 16 characters"),
    (["--token-env", "X"], "without it the server is read-only"),
])
def test_serve_refuses_actions_without_a_token(jobs_dir: Path, args: list[str], message: str) -> None:
    done = cli(["serve", "jobs", *args], jobs_dir)
    assert done.returncode == 2 and message in done.stderr
