"""`load_job`: a job file of either kind as a validated JobSpec: gobblin-py's YAML (`loader`), or an Apache Gobblin
job file translated first (`gobblin/`); each of those two imports only what is below it."""

from __future__ import annotations

from pathlib import Path

from gobblin_py.config.gobblin import is_gobblin_job, load_gobblin_job
from gobblin_py.config.loader import load_yaml_job
from gobblin_py.config.model import JobSpec


def load_job(path: str | Path, *, master: str | None = None, strict: bool = False, writer_schema: bool = True) -> JobSpec:
    """Read, merge over the defaults and validate a job file; ConfigError lists every problem.

    An Apache Gobblin job file (`.pull`, `.job`, `.properties`, `.conf`) is translated first (see
    `gobblin_py.config.gobblin`); `strict` makes its unused keys errors; `writer_schema=False` (for `gobblin-py
    infer`, which writes it) does not require that the writer gets an Avro schema."""
    path = Path(path)
    if is_gobblin_job(path):
        return load_gobblin_job(path, master=master, strict=strict, writer_schema=writer_schema)
    return load_yaml_job(path, master=master, writer_schema=writer_schema)
