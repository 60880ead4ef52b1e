"""An S3-compatible server on 127.0.0.1 for tests (moto's server), with helpers to read what a job published."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from support.kafka_broker import free_port

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


class LocalS3:
    """moto's S3 server on a free 127.0.0.1 port; sets test credentials in the environment (child processes
    inherit them) and restores it on stop."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._saved: dict[str, str | None] = {}

    def start(self) -> LocalS3:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._saved = {k: os.environ.get(k) for k in CREDENTIALS}
        os.environ.update(CREDENTIALS)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def options(self) -> dict[str, dict[str, Any]]:
        """The job's `job.filesystems` value that points s3:// at this server (test credentials travel with the job,
        so Spark's workers need no environment of their own)."""
        return {"s3": {"endpoint_url": self.endpoint, "key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                       "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}}

    def client(self) -> Any:
        """A fresh s3fs filesystem on this server (no caches shared with the code under test)."""
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True, use_listings_cache=False)

    def new_bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().mkdir(name)
        return name

    def keys(self, prefix: str) -> list[str]:
        """Every object under `bucket/prefix`, as `bucket/key`."""
        fs = self.client()
        return sorted(fs.find(prefix)) if fs.exists(prefix) else []

    def download(self, prefix: str, local: Path) -> Path:
        """Copy every object under `bucket/prefix` into `local` (replaced), keeping relative paths."""
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True)
        fs = self.client()
        base = prefix.rstrip("/") + "/"
        for key in self.keys(prefix):
            dest = local / key[len(base):]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(fs.cat_file(key))
        return local
