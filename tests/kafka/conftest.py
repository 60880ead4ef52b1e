"""Kafka tests use the session broker and per-test topic fixtures of tests/conftest.py."""
