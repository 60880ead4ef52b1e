"""Which topics a Kafka job reads (Flink's subscriber): the named ones, which must exist, or the broker's topics that
`topic_pattern` selects; shared by planning, lag, the consumer-group copy and the dead-letter check."""

from __future__ import annotations

from gobblin_py.builtin.sources.kafka.settings import KafkaSettings
from gobblin_py.errors import SourceError


def select_topics(s: KafkaSettings, available: set[str]) -> list[str]:
    """The topics of `available` the job reads, in order; a named topic the brokers lack fails (SourceError)."""
    if s.topics is not None:
        missing = [t for t in s.topics if t not in available]
        if missing:
            raise SourceError(f"topic(s) {', '.join(map(repr, missing))} do not exist on Kafka broker(s) {s.brokers}")
        candidates = list(s.topics)
    else:
        candidates = sorted(available)
    return [t for t in candidates if s.selects(t) is not None]


def reads_topic(s: KafkaSettings, topic: str) -> str | None:
    """`source.topics` or `source.topic_pattern` when planning would read `topic` (see `KafkaSettings.selects`)."""
    key = s.selects(topic)
    return None if key is None else f"source.{key}"
