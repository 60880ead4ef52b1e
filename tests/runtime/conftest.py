"""Real mounts for fault tests (a tiny tmpfs, a read-only bind mount): the fixtures live in `support.mounts`."""

from support.mounts import fill_disk, mount  # noqa: F401 - fixtures
