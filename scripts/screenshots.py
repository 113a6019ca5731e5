"""Take the README's screenshots from a running app (./scripts/start.sh) in headless Chromium.

    .venv/bin/python scripts/screenshots.py --user researcher --password '…' [--url http://127.0.0.1:8000]

Writes docs/img/{rater-task,rater-phone,admin-run,dashboard}.png. A rater session is started
with a throwaway participant id (its lease expires and goes back to the pool).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--study", default="demo")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, viewport in (("rater-task", {"width": 1280, "height": 820}), ("rater-phone", {"width": 390, "height": 844})):
            page = browser.new_page(viewport=viewport)
            page.goto(f"{args.url}/s/{args.study}/")
            page.fill("input[name=participant_id]", f"screenshot-{secrets.token_hex(3)}")
            consent = page.locator("input[name=consent]")
            if consent.count():
                consent.check()
            page.locator("form button[type=submit]").first.click()
            page.wait_for_selector("#progress-label")
            page.screenshot(path=str(out / f"{name}.png"), full_page=name == "rater-phone")
            page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{args.url}/admin/login/")
        page.fill("#id_username", args.user)
        page.fill("#id_password", args.password)
        page.click("input[type=submit]")
        page.goto(f"{args.url}/admin/judges/judgerun/")
        run_link = page.locator("#result_list tbody tr th a").first
        if run_link.count():
            run_link.click()
            page.wait_for_timeout(2500)  # one htmx refresh
            page.screenshot(path=str(out / "admin-run.png"), full_page=True)
        page.goto(f"{args.url}/dashboard/{args.study}/")
        if page.locator("table").count():
            page.screenshot(path=str(out / "dashboard.png"), full_page=True)
        browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
