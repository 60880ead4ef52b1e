"""Try-it paths that need nothing but an install: a local Kafka-compatible broker with sample events (`gobblin-py demo
kafka`, the `demo` extra)."""
