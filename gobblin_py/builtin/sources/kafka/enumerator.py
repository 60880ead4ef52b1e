"""The offset ranges a plan reads (Flink's enumerator): each partition's range from its committed offset, the ranges cut
to a run's record limit, and the WorkUnit of one range (its split, and what the state keeps), named by everything
its output holds."""

from __future__ import annotations

import logging
from typing import Any

from gobblin_py.api import SourceState, WorkUnit
from gobblin_py.api.names import workunit_id
from gobblin_py.builtin.sources.kafka.identity import TopicIdentity, state_props
from gobblin_py.builtin.sources.kafka.registry import KEY, VALUE, OutputSchema, SchemaPart
from gobblin_py.builtin.sources.kafka.settings import TOPIC_PREFIX_CHARS, KafkaSettings
from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.errors import SourceError

log = logging.getLogger(__name__)


def plan_partition(s: KafkaSettings, tp: Any, committed: Any, begin: int, end: int, state: SourceState,
                   from_start: bool = False) -> tuple[int, int] | None:
    """The offset range `[start, end)` to read of one partition (from its first offset `from_start`), or None when
    it has no new data. Committed offsets the broker no longer has are a loss the run's summary names."""
    where = f"{tp.topic}/{tp.partition} on {s.brokers}"
    if from_start:
        start, new = begin, True
    elif committed is None:
        start = begin if s.bootstrap_with_offset == "earliest" else end
        new = True
    else:
        start, new = int(committed), False
        if start < begin or start > end:
            policy = s.reset_on_offset_out_of_range
            if policy == "fail":
                raise SourceError(f"{where}: committed offset {start} is outside the available range [{begin}, {end}); "
                                  "set reset_on_offset_out_of_range: earliest or latest to go on")
            reset = begin if policy == "earliest" else end
            skipped = f"offsets {start}..{begin - 1} ({begin - start} records) were deleted by retention" if start < begin \
                else f"the partition now ends at {end}, before the committed offset"
            also = f" and skipping offsets {max(start, begin)}..{end - 1}" if policy == "latest" and end > max(start, begin) else ""
            lost = (f"{tp.topic}/{tp.partition}: committed offset {start} is out of range [{begin}, {end}): {skipped}; "
                    f"reset to the {policy} offset {reset}{also}" + (" (records lost)" if start < begin or also else ""))
            log.warning("%s on %s", lost, s.brokers)
            state.report_notice(tp.topic, lost)
            start, new = reset, True  # an empty range still commits the reset offset
    if start >= end and not new:
        return None  # no new data: the committed watermark carries forward unchanged
    return start, end


def capped(ranges: list[tuple[Any, int, int]], limit: int | None) -> list[tuple[Any, int, int]]:
    """The ranges cut to `limit` records in all, each partition's share in proportion to its backlog (largest
    remainders first), so every partition moves on; a partition whose share is nothing waits for the next run."""
    total = sum(end - start for _, start, end in ranges)
    if limit is None or total <= limit:
        return ranges
    shares = [limit * (end - start) / total for _, start, end in ranges]
    taken = [int(x) for x in shares]
    for i in sorted(range(len(ranges)), key=lambda i: shares[i] - taken[i], reverse=True)[:limit - sum(taken)]:
        taken[i] += 1
    return [(tp, start, start + n) for (tp, start, end), n in zip(ranges, taken) if n > 0 or start == end]


def workunit(s: KafkaSettings, tp: Any, start: int, end: int, identity: TopicIdentity,
             schemas: dict[SchemaPart, OutputSchema] | None = None) -> WorkUnit:
    """The WorkUnit of offsets `[start, end)`, named by cluster, topic identity, partition, range (and output schemas:
    a range read again into another schema is another file). Its split says what to read and how; its props keep, with
    the partition's watermark, the topic's identity (the topic id, or the range's first record; cleared when the range
    is empty) and the output schemas' identities."""
    schemas = schemas or {}
    schema_part = tuple(f"{part.id_tag}:{out.schema_id}" + (f"+{out.fingerprint}" if out.merged else "")
                        for part, out in schemas.items())
    wu_id = workunit_id(f"{tp.topic[:TOPIC_PREFIX_CHARS]}.{tp.partition}.{start}-{end}", "kafka", identity.cluster_id,
                        tp.topic, identity.of(tp, start), tp.partition, start, end, *schema_part)
    kept = state_props(identity, tp)
    for part, out in schemas.items():
        kept.update(part.state_props(out))
    split = KafkaSplit(topic=tp.topic, partition=tp.partition, client=s.client, value_schema=schemas.get(VALUE),
                       key_schema=schemas.get(KEY))
    return WorkUnit(id=wu_id, dataset=tp.topic, watermark_key=str(tp.partition), low_watermark=start,
                    expected_high_watermark=end, props=kept, split=split.packed())
