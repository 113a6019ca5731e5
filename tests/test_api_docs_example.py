"""The Python example in docs/API.md runs as written against a real server."""

import re
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from annotations.models import Study
from tests.factories import make_staff

DOC = Path(__file__).resolve().parents[1] / "docs" / "API.md"


@pytest.mark.slow
def test_the_python_example_in_the_api_docs_works(live_server, transactional_db, monkeypatch, capsys):
    from django.core.cache import cache

    cache.clear()
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    token = Token.objects.create(user=make_staff())
    code = code.replace("https://biasstudy.example.org", live_server.url)
    code = code.replace("9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", token.key)
    monkeypatch.chdir(DOC.parents[1])
    exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 - our own documentation
    assert Study.objects.filter(slug="demo-2").exists()
    assert capsys.readouterr().out.strip() == "0 votes"
