import pytest

from biasstudy.env import EnvError, env_bool, env_int, load_env_file


def test_a_local_env_file_fills_in_what_the_environment_lacks(tmp_path, monkeypatch):
    monkeypatch.setenv("BIASSTUDY_X_SET", "from-environment")
    monkeypatch.delenv("BIASSTUDY_X_NEW", raising=False)
    path = tmp_path / ".env"
    path.write_text("# comment\n\nBIASSTUDY_X_SET=from-file\nBIASSTUDY_X_NEW='quoted value'\n")
    load_env_file(path)
    import os

    assert os.environ["BIASSTUDY_X_SET"] == "from-environment"
    assert os.environ["BIASSTUDY_X_NEW"] == "quoted value"
    monkeypatch.delenv("BIASSTUDY_X_NEW")


def test_a_malformed_env_file_names_its_line(tmp_path):
    path = tmp_path / ".env"
    path.write_text("GOOD=1\nthis is not a setting\n")
    with pytest.raises(EnvError, match=r"\.env, line 2"):
        load_env_file(path)


def test_a_missing_env_file_is_fine(tmp_path):
    load_env_file(tmp_path / "absent")


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("off", False), ("TRUE", True), ("", False)])
def test_booleans_are_read_strictly(monkeypatch, raw, expected):
    monkeypatch.setenv("BIASSTUDY_X_BOOL", raw)
    assert env_bool("BIASSTUDY_X_BOOL", not expected) is expected


def test_a_malformed_boolean_fails_loudly_naming_the_variable(monkeypatch):
    monkeypatch.setenv("BIASSTUDY_X_BOOL", "maybe")
    with pytest.raises(EnvError, match="BIASSTUDY_X_BOOL"):
        env_bool("BIASSTUDY_X_BOOL", False)


def test_a_malformed_integer_fails_loudly_naming_the_variable(monkeypatch):
    monkeypatch.setenv("BIASSTUDY_X_INT", "12a")
    with pytest.raises(EnvError, match="BIASSTUDY_X_INT"):
        env_int("BIASSTUDY_X_INT", 1)


def test_the_cache_url_chooses_the_shared_database_cache_by_default_and_refuses_unknown_schemes():
    from biasstudy.env import cache_from_url

    assert cache_from_url("")["BACKEND"] == "django.core.cache.backends.db.DatabaseCache"
    assert cache_from_url("redis://cache:6379/1")["LOCATION"] == "redis://cache:6379/1"
    assert cache_from_url("locmem://")["BACKEND"].endswith("LocMemCache")
    with pytest.raises(EnvError, match="CACHE_URL='memcached://x'"):
        cache_from_url("memcached://x")
