"""The status page's HTML: Jinja2 templates (every value escaped) over the overview's data, charts as inline SVG."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from gobblin_py.operating.overview import JobOverview, LagLimits, RunDetail, RunSummary
from gobblin_py.operating.server.charts import Bar, bar_chart

_env = Environment(loader=PackageLoader("gobblin_py.operating.server", "templates"), autoescape=select_autoescape(["html"]))

CHART_RUNS = 50


@dataclass(frozen=True)
class Chart:
    caption: str
    svg: str


def _now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def overview(jobs: list[JobOverview], limits: LagLimits) -> str:
    needing = sum(1 for j in jobs if j.attention)
    return _env.get_template("overview.html").render(jobs=jobs, limits=limits, needing=needing, now=_now())


def charts(runs: list[RunSummary]) -> list[Chart]:
    """Duration, records/s, records per dataset and failures over the last runs, oldest left."""
    runs = runs[-CHART_RUNS:]
    label = [r.started.replace("T", " ")[:16] for r in runs]
    failed = [r.status not in ("succeeded", "running", "cancelled") for r in runs]
    datasets = sorted({d for r in runs for d in r.per_dataset})

    def bars(values: list[tuple[float, ...]], unit: str) -> list[Bar]:
        return [Bar(label[i], v, failed[i], f"{label[i]} · {runs[i].status} · " + " + ".join(f"{x:,.1f}" for x in v) + f" {unit}")
                for i, v in enumerate(values)]

    return [
        Chart("Duration", bar_chart("Duration", "seconds", bars([(r.duration_s,) for r in runs], "s"))),
        Chart("Records per second", bar_chart("Records per second", "records/s", bars([(r.records_per_s,) for r in runs], "records/s"))),
        Chart("Records written per dataset", bar_chart("Records written per dataset", "records",
                                                       bars([tuple(float(r.per_dataset.get(d, 0)) for d in datasets) for r in runs], "records"),
                                                       series=datasets or None)),
        Chart("Failures (✖ a failed run, bar height 1)", bar_chart("Failures", "failed", bars([(1.0 if f else 0.0,) for f in failed], "failed"))),
    ]


def job(view: JobOverview, runs: list[dict[str, Any]]) -> str:
    summaries = [RunSummary.of(r) for r in runs]
    return _env.get_template("job.html").render(j=view, charts=charts(summaries), runs=list(reversed(summaries)), now=_now())


def run(job_name: str, detail: RunDetail) -> str:
    return _env.get_template("run.html").render(job=job_name, r=detail.run, errors=detail.error_files, now=_now())
