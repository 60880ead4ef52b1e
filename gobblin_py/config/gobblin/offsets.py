"""Kafka offsets to start from, for moving a Gobblin Kafka job: `topic,partition,offset` lines → watermarks.

The offset is the next one to read: Gobblin's committed (actual high) watermark of the partition, and what a Kafka
consumer group commits. gobblin-py's Kafka watermark has the same meaning, keyed by the partition number.
"""

from __future__ import annotations

from pathlib import Path

from gobblin_py.config.gobblin.properties import read_text
from gobblin_py.errors import ConfigError

HEADER = ("topic", "partition", "offset")


def read_offsets(path: Path) -> dict[str, dict[str, int]]:
    """topic → {partition: next offset}; blank lines, `#` comments and a `topic,partition,offset` header are
    skipped; a malformed line or a partition given twice with different offsets is refused naming the line."""
    out: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], int] = {}
    problems: list[str] = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [f.strip() for f in text.split(",")]
        if tuple(f.lower() for f in fields) == HEADER:
            continue
        where = f"{path}:{number}"
        if len(fields) != 3 or not fields[0]:
            problems.append(f"{where}: expected topic,partition,offset; got {text!r}")
            continue
        topic, partition, offset = fields
        if not partition.isdigit() or not offset.isdigit():
            problems.append(f"{where}: partition and offset must be whole numbers ≥ 0; got {partition!r}, {offset!r}")
            continue
        key = (topic, str(int(partition)))
        if key in seen and out[topic][key[1]] != int(offset):
            problems.append(f"{where}: {topic} partition {key[1]} is given again with another offset (first at line {seen[key]})")
            continue
        seen.setdefault(key, number)
        out.setdefault(topic, {})[key[1]] = int(offset)
    if problems:
        raise ConfigError(f"{path}: bad offsets file ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n"
                          + "\n".join(f"  {p}" for p in problems))
    if not out:
        raise ConfigError(f"{path}: no offsets in the file (expected topic,partition,offset lines)")
    return out
