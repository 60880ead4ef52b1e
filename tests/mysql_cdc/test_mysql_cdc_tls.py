"""The source's connections share one "preferred" TLS context (`tls.py`), made as PyMySQL makes its own per
connection, so sharing it changes nothing but the cost; explicit ssl settings keep PyMySQL's context per connection."""

from __future__ import annotations

import ssl

from pymysql.connections import Connection

from gobblin_py.builtin.sources.mysql_cdc.tls import PreferredTls


def test_preferred_context_made_once_as_pymysql_makes_it() -> None:
    a, b = PreferredTls(defer_connect=True), PreferredTls(defer_connect=True)
    own = Connection(defer_connect=True)  # PyMySQL's own: a new context for every connection
    assert a.ctx is b.ctx and own.ctx is not a.ctx
    assert (a.ssl, a._ssl_required) == (own.ssl, own._ssl_required) == (True, False)  # preferred: falls back
    assert (a.ctx.verify_mode, a.ctx.check_hostname, a.ctx.verify_flags, a.ctx.minimum_version) == (
        own.ctx.verify_mode, own.ctx.check_hostname, own.ctx.verify_flags, own.ctx.minimum_version)


def test_explicit_ssl_settings_are_not_shared() -> None:
    a = PreferredTls(defer_connect=True, ssl={"verify_mode": "required"})
    b = PreferredTls(defer_connect=True, ssl={"verify_mode": "required"})
    assert a.ctx is not b.ctx and a.ctx.verify_mode == ssl.CERT_REQUIRED and a._ssl_required
