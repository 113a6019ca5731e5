"""Take the README's screenshots in headless Chromium, from a throwaway demo or a running app.

    .venv/bin/python scripts/screenshots.py                  # a throwaway demo, built and served here
    .venv/bin/python scripts/screenshots.py --url http://127.0.0.1:8000 --user researcher --password '…'

The throwaway demo: a SQLite file in a temporary folder with the demo study (manage.py
load_demo, with its simulated judges), 24 simulated raters, a staff login, served by gunicorn on
a free loopback port; the judge run is an OpenAI-compatible stand-in on loopback
(tests/judge_server.py), slowed down so the run page is caught while it runs.

Writes docs/img/{rater-task,rater-phone,study-form,review,admin-run,dashboard}.png at 1280 px
wide (the phone shot 390 px), each cut to what it shows and reduced to 256 colours so that
every file stays small. A rater session is started with a throwaway participant id. Emoji need
Debian's fonts-noto-color-emoji (scripts/test.sh installs it with chromium), or they are boxes.
"""

from __future__ import annotations

import argparse
import io
import re
import secrets
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from PIL import Image
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

DEMO_USER = "researcher"
RUN_CODE = """
from annotations.models import Study
from judges.services import judge_run_execute, judge_run_start, llm_judge_create
config = llm_judge_create(name="Loopback judge (stand-in)", backend="openai_compatible", model="stand-in",
                          base_url={base_url!r}, prompt_style="vote_only", votes_per_item=6, concurrency=1)
run = judge_run_start(study=Study.objects.get(slug="demo"), judge=config.judge, enqueue=False)
print(run.pk, flush=True)
judge_run_execute(run_id=run.pk)
"""


def save(png: bytes, path: Path, *, height: int | None = None) -> None:
    """The screenshot cut to `height` pixels and reduced to 256 colours (what pngquant would do)."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if height and image.height > height:
        image = image.crop((0, 0, image.width, height))
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    print(f"{path.name}: {image.width}×{image.height}, {path.stat().st_size // 1024} KiB")


def first_id(page, model: str) -> str:
    """The id of the first row of the admin list on the page."""
    href = page.locator("#result_list tbody tr th a").first.get_attribute("href")
    return re.search(rf"/{model}/(\d+)/", href).group(1)


def log_in(page, url: str, user: str, password: str) -> None:
    page.goto(f"{url}/admin/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{url}/admin/")


def rater_shots(browser, url: str, study: str, out: Path) -> None:
    for name, viewport in (
        ("rater-task", {"width": 1280, "height": 820}),
        ("rater-phone", {"width": 390, "height": 844}),
    ):
        page = browser.new_page(viewport=viewport)
        page.goto(f"{url}/s/{study}/")
        page.fill("input[name=participant_id]", f"screenshot-{secrets.token_hex(3)}")
        consent = page.locator("input[name=consent]")
        if consent.count():
            consent.check()
        page.locator("form button[type=submit]").first.click()
        page.wait_for_selector("#progress-label")
        save(page.screenshot(full_page=name == "rater-phone"), out / f"{name}.png", height=1600)
        page.close()


def staff_shots(page, url: str, study: str, out: Path) -> None:
    page.goto(f"{url}/admin/annotations/study/?q={study}")
    study_pk = first_id(page, "study")
    page.goto(f"{url}/admin/annotations/question/add/?study={study_pk}")
    page.fill("#id_external_id", "sky-1")
    page.select_option("#id_bloom_level", "understanding")
    page.fill("#id_text", "Why is the sky blue?")
    page.fill("#id_answer_a1", "Sunlight scatters off the molecules of the air, blue light most (Rayleigh scattering).")
    page.fill("#id_answer_a2", "Because the sky reflects the colour of the sea.")
    save(page.screenshot(full_page=True), out / "study-form.png", height=900)
    page.goto(f"{url}/admin/perturbations/perturbationstudy/{study_pk}/review/")
    save(page.screenshot(full_page=True), out / "review.png", height=1100)
    page.goto(f"{url}/dashboard/{study}/")
    page.locator("figure.plot img").first.wait_for()
    for image in page.locator("figure.plot img").all():  # lazy: each loads once scrolled to
        image.scroll_into_view_if_needed()
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_load_state("networkidle")
    save(page.screenshot(full_page=True), out / "dashboard.png", height=1500)


def run_shot(page, url: str, run_id: str, out: Path) -> None:
    page.goto(f"{url}/admin/judges/judgerun/{run_id}/change/")
    # Caught while votes arrive: the page refreshes itself every 2 s.
    expect(page.locator(".run-done")).not_to_have_text(re.compile(r"^0 /"), timeout=60_000)
    save(page.screenshot(full_page=True), out / "admin-run.png", height=700)


def demo(browser, out: Path) -> None:
    from tests.judge_server import JudgeServer
    from tests.live import PYTHON, gunicorn, live_env, manage, run_django

    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="screenshots-")))
        env = live_env(
            f"sqlite:///{folder / 'demo.sqlite3'}", DJANGO_DEBUG="1"
        )  # whitenoise serves static files from the app folders
        password = secrets.token_urlsafe(12)
        for args in (
            ["migrate", "--no-input", "-v0"],
            ["load_demo"],
            ["simulate", "--study", "demo", "--raters", "24", "--flag-share", "0.1", "--seed", "3"],
        ):
            done = manage(*args, env=env, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
        run_django(
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_superuser({DEMO_USER!r}, password={password!r})",
            env,
        )
        url = stack.enter_context(gunicorn(env, workers=2, threads=4))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        rater_shots(browser, url, "demo", out)
        log_in(page, url, DEMO_USER, password)
        staff_shots(page, url, "demo", out)
        server = stack.enter_context(JudgeServer(delay=0.4))
        code = RUN_CODE.format(base_url=server.base_url)
        script = f"import django; django.setup(); {code}"
        runner = subprocess.Popen(  # noqa: S603 - our own code, run like tests.live.run_django
            [PYTHON, "-c", script], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        try:
            run_shot(page, url, runner.stdout.readline().strip(), out)
        finally:
            runner.terminate()
            runner.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running app; without it, a throwaway demo is built and served")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--study", default="demo")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args()
    if args.url and not (args.user and args.password):
        parser.error("--url needs --user and --password (a staff login)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            if args.url is None:
                demo(browser, out)
            else:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                rater_shots(browser, args.url, args.study, out)
                log_in(page, args.url, args.user, args.password)
                staff_shots(page, args.url, args.study, out)
                page.goto(f"{args.url}/admin/judges/judgerun/")
                if page.locator("#result_list tbody tr th a").count():
                    run_shot(page, args.url, first_id(page, "judgerun"), out)
        finally:
            browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
