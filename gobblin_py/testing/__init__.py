"""What a plugin author reuses to test their own plugins with pytest:

- `conformance`: `check_source`, `check_converter`, `check_writer`, `check_committer` run a Source, Converter,
  DataWriter or DataPublisher the way the framework does and fail naming the contract rule it breaks
  (deterministic work units and file names, byte-identical rewrites, idempotent commit steps …).
- `crash`: the crash harness: run the real `gobblin-py` in a child process, SIGKILL it at a named crash point
  (`commit_points()`, `recovery_points()`) or a random time, run again, and `snapshot()` the output to
  check that every record is there exactly once.
- `outputs`: read back what a job published (`read_avro_dir`, `read_error_files`).
- `faults`: fault-injecting plugins to name in a test job (`gobblin_py.testing.faults:FlakyConverter`, …).
- `commits`: pending commit sequences of many datasets built from real files, for commit-layer tests.

This project's own fixtures (a local Kafka broker, an S3 server, a Spark cluster, example jobs) live in
tests/support/, not here.
"""
