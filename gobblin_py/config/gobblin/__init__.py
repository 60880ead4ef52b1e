"""Apache Gobblin job files run unchanged: Java properties (`.pull`, `.job`, `.properties`) and HOCON (`.conf`).

`resolve` assembles a file's settings as Gobblin does (parent `.properties`, `job.template`, `include=`, `${…}`),
`mapping` is the one table of Gobblin classes and keys, `translate` applies it (a module per section), `load`
validates the result.
"""

from gobblin_py.config.gobblin.load import GOBBLIN_SUFFIXES, convert_job, is_gobblin_job, load_gobblin_job

__all__ = ["GOBBLIN_SUFFIXES", "convert_job", "is_gobblin_job", "load_gobblin_job"]
