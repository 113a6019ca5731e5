"""`manage.py check --deploy` finds nothing under production-like settings."""

import re
import secrets

from tests.live import live_env, manage

PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "biasstudy.settings",
    "DJANGO_DEBUG": "0",
    "DJANGO_SECURE_COOKIES": "1",
    "DJANGO_SSL_REDIRECT": "1",
    "DJANGO_HSTS_SECONDS": "31536000",
    "DJANGO_HSTS_INCLUDE_SUBDOMAINS": "1",
    "DJANGO_HSTS_PRELOAD": "1",
    "DJANGO_BEHIND_PROXY": "1",
}


def test_the_deploy_check_is_clean_under_production_settings(tmp_path):
    env = live_env(
        f"sqlite:///{tmp_path / 'deploy.sqlite3'}", DJANGO_SECRET_KEY=secrets.token_urlsafe(64), **PRODUCTION
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests for their own process only
    done = manage("check", "--deploy", "--fail-level", "DEBUG", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout
    assert "WARNINGS" not in done.stdout + done.stderr


def test_production_settings_refuse_the_development_secret_key(tmp_path):
    env = live_env(f"sqlite:///{tmp_path / 'deploy.sqlite3'}", **PRODUCTION)
    env.pop("DJANGO_SECRET_KEY", None)
    done = manage("check", "--deploy", env=env)
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY" in done.stderr


def test_the_one_machine_recipe_gets_exactly_the_three_warnings_docs_deploy_expects(tmp_path):
    """docs/DEPLOY.md: with the one-machine recipe (nginx redirects to HTTPS, HSTS without
    subdomains and preload) `check --deploy` reports W005, W008 and W021, and nothing else."""
    recipe = {
        "DJANGO_SETTINGS_MODULE": "biasstudy.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "study.example.org",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://study.example.org",
        "DJANGO_BEHIND_PROXY": "1",
        "DATABASE_CONN_MAX_AGE": "60",
    }
    env = live_env(f"sqlite:///{tmp_path / 'recipe.sqlite3'}", DJANGO_SECRET_KEY=secrets.token_urlsafe(50), **recipe)
    for name in ("DJANGO_ALLOW_ASYNC_UNSAFE", "DJANGO_SECURE_COOKIES", "DJANGO_SSL_REDIRECT", "DJANGO_HSTS_SECONDS"):
        env.pop(name, None)  # the recipe leaves them at their defaults
    done = manage("check", "--deploy", env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(re.findall(r"\(security\.(W\d+)\)", done.stdout + done.stderr)) == ["W005", "W008", "W021"]
    assert "System check identified 3 issues (0 silenced)." in done.stdout + done.stderr


def test_a_service_given_its_secret_key_ignores_a_developers_env_file(tmp_path):
    """start.sh's .env (DEBUG on) left in a deployment's checkout: the service, which sets its
    secret key but not DJANGO_DEBUG, runs with DEBUG off; a laptop without the key reads it."""
    laptop = tmp_path / ".env"
    laptop.write_text("DJANGO_DEBUG=1\nDJANGO_SECRET_KEY=laptop-key-only-for-development\n")
    service = live_env(
        f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        DJANGO_SETTINGS_MODULE="biasstudy.settings",
        BIASSTUDY_ENV_FILE=str(laptop),
    )
    for name in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"):
        service.pop(name, None)
    show_debug = ("shell", "-c", "from django.conf import settings; print('DEBUG', settings.DEBUG)")
    done = manage(*show_debug, env={**service, "DJANGO_SECRET_KEY": secrets.token_urlsafe(64)})
    assert "DEBUG False" in done.stdout, done.stdout + done.stderr
    done = manage(*show_debug, env=service)
    assert "DEBUG True" in done.stdout, done.stdout + done.stderr
