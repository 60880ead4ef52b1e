"""gobblin-py: Gobblin-style ingestion jobs run as Spark tasks, published exactly once."""

__version__ = "0.1.0"
