"""Static files as deployed: `collectstatic` under the production settings writes hashed names
and gzipped copies, and whitenoise in gunicorn serves a page's stylesheet compressed with a
year-long max-age."""

from __future__ import annotations

import json
import re

import pytest

from tests.live import gunicorn, live_env, manage, prepare

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow


def test_collectstatic_writes_compressed_hashed_files_that_whitenoise_serves_for_a_year(tmp_path):
    root = tmp_path / "staticfiles"
    env = live_env(
        f"sqlite:///{tmp_path / 'static.sqlite3'}",
        DJANGO_SETTINGS_MODULE="biasstudy.settings",
        DJANGO_STATIC_ROOT=str(root),
        DJANGO_SECRET_KEY="static-test-" + "Qz8w" * 12,
    )
    done = manage("collectstatic", "--no-input", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((root / "staticfiles.json").read_text())["paths"]
    hashed = manifest["biasstudy/app.css"]
    assert re.fullmatch(r"biasstudy/app\.[0-9a-f]{12}\.css", hashed)
    assert (root / f"{hashed}.gz").exists()

    prepare(env)
    with gunicorn(env, workers=1, threads=2) as base:
        page = httpx.get(f"{base}/", timeout=30)
        assert page.status_code == 200
        assert f"/static/{hashed}" in page.text  # pages link the hashed name
        css = httpx.get(f"{base}/static/{hashed}", headers={"Accept-Encoding": "gzip"}, timeout=30)
    assert css.status_code == 200
    assert css.headers["Content-Encoding"] == "gzip"
    max_age = int(re.search(r"max-age=(\d+)", css.headers["Cache-Control"]).group(1))
    assert max_age >= 365 * 24 * 3600
