"""`commit_offsets_to_group`: a copy of the committed offsets in a Kafka consumer group, for lag tools (Burrow, Kafka
UIs, Datadog), which read lag from a group's offsets. Best effort and never read back: the job's watermarks stay the
truth, and a group moved by someone else changes nothing of what the job reads."""

from __future__ import annotations

from typing import Any

from gobblin_py.builtin.sources.kafka.settings import KafkaSettings, consumer_settings
from gobblin_py.errors import SourceError, describe

METADATA = "gobblin-py: a copy of the job's committed watermarks"
"""The metadata each committed offset carries (a Kafka UI shows it): where the offsets come from."""


def commit_offsets(s: KafkaSettings, group: str, offsets: dict[Any, int]) -> None:
    """Set `group`'s offsets (`TopicPartition` → the next offset to read, Kafka's own convention, which our watermarks
    follow) through the admin API (OffsetCommit as an empty group's member would); a SourceError naming the group and
    the partitions the broker refused."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    if not offsets:
        return
    settings = consumer_settings(s)
    try:
        admin = KafkaAdminClient(**{k: v for k, v in settings.items() if k in KafkaAdminClient.DEFAULT_CONFIG})
    except KafkaError as exc:
        raise SourceError(f"consumer group {group}: cannot reach Kafka broker(s) {s.brokers}: {describe(exc)}") from None
    try:
        answers = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, METADATA, -1)
                                                    for tp, offset in offsets.items()})
    except KafkaError as exc:
        raise SourceError(f"consumer group {group} on {s.brokers}: offsets not committed: {describe(exc)}") from None
    finally:
        admin.close()
    refused = sorted(f"{tp.topic}/{tp.partition} ({getattr(err, '__name__', err)})" for tp, err in answers.items()
                     if getattr(err, "errno", 0))
    if refused:
        raise SourceError(f"consumer group {group} on {s.brokers} refused the offsets of {', '.join(refused)} (a group "
                          "with active members takes no offsets from outside it: give the job a group of its own)")
