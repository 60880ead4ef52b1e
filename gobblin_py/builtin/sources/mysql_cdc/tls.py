"""The source's PyMySQL connection class: TLS "preferred" (PyMySQL's default without ssl settings) with one context
per process. PyMySQL 1.2 makes a default context, loading the system's CA certificates, for every connection; a
continuous run opens three connections a checkpoint (planning, the binlog's stream and control), and the loads were
about 3 % of a run's samples at 30,000 changes/s (issue 45's profile)."""

from __future__ import annotations

import ssl
import threading
from typing import Any

from pymysql.connections import Connection

_PREFERRED: ssl.SSLContext | None = None
_LOCK = threading.Lock()


class PreferredTls(Connection):
    """A PyMySQL connection whose default "preferred" TLS context is made once and shared (a context is safe to share
    between connections and threads); explicit ssl settings are PyMySQL's own, context per connection."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        global _PREFERRED
        if not isinstance(sslp, dict) or sslp:
            return super()._create_ssl_ctx(sslp)
        with _LOCK:
            if _PREFERRED is None:
                _PREFERRED = super()._create_ssl_ctx({})
            return _PREFERRED
