"""No secret reaches a file the tool writes: a publisher's settings go into every commit record, so every way a secret
can sit in them is refused by `validate`, naming the key and never the value (issue: a catalog URI with `?password=`,
a password holding `/`, `adls.account-key`, `header.Authorization` were written in clear into commit records)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin.test_iceberg_publisher import iceberg_job
from support.jobs import example_job, write_job

from gobblin_py.api.secrets import is_secret_key, secret_paths, url_secret
from gobblin_py.config import load_job
from gobblin_py.errors import ConfigError

pytest.importorskip("pyiceberg")
SECRET = "Hunter2-s3cr3t/xyz"


def _refused(tmp: Path, job: dict, key: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_job(write_job(tmp, job))
    text = err.value.message
    assert key in text, text
    assert SECRET not in text and SECRET.split("/")[0] not in text, f"the error repeats the secret: {text}"
    return text


@pytest.mark.parametrize("catalog, key", [
    ({"uri": f"postgresql://cat.example:5432/iceberg?user=u&password={SECRET}"}, "publisher.catalog.uri"),
    ({"uri": f"postgresql://u:{SECRET}@cat.example:5432/iceberg"}, "publisher.catalog.uri"),
    ({"adls.account-key": SECRET}, "publisher.catalog.adls.account-key"),
    ({"header.Authorization": f"Bearer {SECRET}"}, "publisher.catalog.header.Authorization"),
    ({"s3.secret-access-key": SECRET}, "publisher.catalog.s3.secret-access-key"),
    ({"credential": SECRET}, "publisher.catalog.credential"),
])
def test_a_secret_in_the_iceberg_catalog_is_refused_without_repeating_it(tmp_path: Path, catalog: dict, key: str) -> None:
    job = iceberg_job(tmp_path)
    job["publisher"]["catalog"] = {"name": "prod", "type": "sql", **catalog}
    assert "written into every commit record" in _refused(tmp_path, job, key)


def test_catalog_settings_without_a_secret_pass(tmp_path: Path) -> None:
    job = iceberg_job(tmp_path)
    job["publisher"]["catalog"] = {"name": "prod", "type": "sql", "uri": f"sqlite:///{tmp_path}/cat.db",
                                   "header.X-Client": "gobblin-py", "oauth2-server-uri": "https://auth.example/token"}
    assert load_job(write_job(tmp_path, job)).branches[0].publisher.settings.catalog["header.X-Client"] == "gobblin-py"


@pytest.mark.parametrize("url", [
    f"postgresql://app@db.example:5432/shop?password={SECRET}",
    f"postgresql://app:{SECRET}@db.example:5432/shop",
])
def test_a_jdbc_url_holding_a_password_is_refused_without_repeating_it(tmp_path: Path, url: str) -> None:
    job = example_job(tmp_path, source={"class": "jdbc", "url": url, "tables": [
        {"table": "public.t", "watermark_column": "ts", "primary_key": "id"}]}, converters=[])
    assert "password_env" in _refused(tmp_path, job, "source")


def test_password_env_holding_the_password_itself_is_refused_without_repeating_it(tmp_path: Path) -> None:
    job = example_job(tmp_path, source={"class": "jdbc", "url": "postgresql://app@db.example:5432/shop",
                                        "password_env": "Hunter2s3cr3t", "tables": [
                                            {"table": "public.t", "watermark_column": "ts", "primary_key": "id"}]},
                      converters=[])
    with pytest.raises(ConfigError) as err:
        load_job(write_job(tmp_path, job))
    assert "password_env" in err.value.message and "Hunter2s3cr3t" not in err.value.message, err.value.message


def test_what_counts_as_a_secret() -> None:
    assert all(map(is_secret_key, ["password", "sasl_plain_password", "adls.account-key", "header.Authorization",
                                   "s3.secret-access-key", "client.session-token", "adls.sas-token.acct", "credential"]))
    assert not any(map(is_secret_key, ["password_env", "uri", "warehouse", "header.X-Client", "table"]))
    assert url_secret("postgresql://u:p/q@h/db") and url_secret("rest://h/x?token=abc") and url_secret("s://h/?a=1&PASSWORD=x")
    assert url_secret("postgresql://u@h:5432/db") is None and url_secret("sqlite:////tmp/a/catalog.db") is None
    assert secret_paths({"a": {"b": [{"password": "x"}]}, "u": "http://u:p@h"}) == [
        ("a.b[0].password", "a secret-looking key"), ("u", "a password in the URL's user info")]
