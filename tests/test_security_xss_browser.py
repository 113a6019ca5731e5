"""A corpus of XSS payloads in every text a page shows (questions, answers in markdown and raw
HTML, instructions, consent, completion code, rater ids, judge names, model outputs and errors,
study titles), rendered in headless Chromium on the rater pages, the admin's lists and change
pages, the perturbation review page and the judge run page. No payload runs: no dialog opens,
window.__xss stays unset, the Content-Security-Policy never has to block anything (so the
sanitiser, not only the CSP, stopped it), and no event-handler attribute, javascript: or data:
link, frame, object or foreign script is left in the DOM.
"""

from __future__ import annotations

import pytest

from annotations.models import Answer, Rater, Vote
from judges.models import JudgeRun
from tests.browser import chromium, session_cookie
from tests.factories import human_pool, make_llm_judge, make_question, make_staff, make_study, make_variant

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN = "window.__xss=1"
PAYLOADS = [
    f"<script>{RUN}</script>",
    f'<img src=x onerror="{RUN}">',
    f'<svg onload="{RUN}"></svg>',
    f"<svg><script>{RUN}</script></svg>",
    f"[markdown link](javascript:{RUN})",
    f'<a href="javascript:{RUN}">raw link</a>',
    f'<a href="jav&#x09;ascript:{RUN}">entity link</a>',
    f'<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;{RUN}">encoded link</a>',
    f'<iframe src="javascript:{RUN}"></iframe>',
    '<iframe srcdoc="<script>parent.__xss=1</script>"></iframe>',
    f'<style>@import "javascript:{RUN}"; body {{ background: red }}</style>',
    f'<div style="background:url(javascript:{RUN})">styled</div>',
    f'<p onclick="{RUN}" onmouseover="{RUN}">hover me</p>',
    '<a href="data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX194c3M9MTwvc2NyaXB0Pg==">data link</a>',
    f'![image](x" onerror="{RUN})',
    f"![image](javascript:{RUN})",
    "[data link](data:text/html,<script>parent.__xss=1</script>)",
    f"&lt;script&gt;{RUN}&lt;/script&gt;",
    f"<scr<script>ipt>{RUN}</script>",
    f'<details open ontoggle="{RUN}"><summary>x</summary></details>',
    f'<input autofocus onfocus="{RUN}">',
    f'<body onload="{RUN}">',
    f'<math><mi xlink:href="javascript:{RUN}">m</mi></math>',
    f'"><script>{RUN}</script>',
    f"'><img src=x onerror={RUN}>",
    f'<form action="javascript:{RUN}"><button>go</button></form>',
    f'<meta http-equiv="refresh" content="0;url=javascript:{RUN}">',
    f'<object data="javascript:{RUN}"></object>',
    f'<embed src="javascript:{RUN}">',
    f'<base href="javascript:{RUN}//">',
    f'<link rel=stylesheet href="javascript:{RUN}">',
    f"<!--><img src=x onerror={RUN}>-->",
    f'[a](https://example.org "title" onmouseover={RUN})',
    f'<noscript><p title="</noscript><img src=x onerror={RUN}>">',
]
BLOB = "\n\n".join(PAYLOADS)
SHORT = f'"><img src=x onerror={RUN}>'  # for fields of 64 to 128 characters

# Run in the page after it loaded: what a surviving payload would have left behind.
INSPECT = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on')) bad.push(`${el.tagName}[${attr.name}]`);
      if (/^\\s*(javascript|data|vbscript):/i.test(attr.value) && ['href', 'src', 'action', 'data', 'xlink:href', 'formaction'].includes(attr.name))
        bad.push(`${el.tagName}[${attr.name}=${attr.value.slice(0, 30)}]`);
    }
    if (['IFRAME', 'OBJECT', 'EMBED', 'BASE', 'FRAME'].includes(el.tagName)) bad.push(el.tagName);
    if (el.tagName === 'SCRIPT' && (!el.src || new URL(el.src).origin !== location.origin || el.textContent.trim()))
      bad.push('SCRIPT ' + (el.src || el.textContent.slice(0, 30)));
    if (el.tagName === 'META' && el.httpEquiv && el.httpEquiv.toLowerCase() === 'refresh' && /javascript/i.test(el.content))
      bad.push('META refresh');
  }
  return {xss: window.__xss === undefined ? null : window.__xss, csp: window.__csp || [], bad};
}"""
WATCH_CSP = """document.addEventListener('securitypolicyviolation', (e) => {
  (window.__csp = window.__csp || []).push(`${e.violatedDirective} ${e.blockedURI} ${e.sample || ''}`);
});"""


@pytest.fixture
def poisoned(db):
    """One study with a payload in every text field the pages show."""
    study = make_study(
        slug="xss", title=SHORT, instructions=BLOB, consent=BLOB, completion_code=SHORT[:64],
        votes_per_item=2, target_per_rater=1,
    )  # fmt: skip
    question = make_question(study, text=BLOB, a1=BLOB, a2="Plain **markdown** answer.\n\n" + BLOB)
    variant = make_variant(question, kind="reference", text=BLOB + "\n\nReferences: [1] " + SHORT)
    rater = Rater.objects.create(study=study, participant_id=SHORT, target=1)
    item = study.items.get(kind__isnull=True)
    vote = Vote.objects.create(
        item=item, judge=human_pool(study), rater=rater, shown_first="a1", choice_shown="first", client_ms=5000
    )
    config = make_llm_judge(name=SHORT)
    run = JudgeRun.objects.create(study=study, judge=config.judge, status="done", total=2, error=BLOB)
    Vote.objects.create(
        item=item, judge=config.judge, run_id=run.pk, round=1, shown_first="a2", choice_shown=None, raw_output=BLOB,
        parse_status="invalid", error=BLOB, meta={"note": BLOB},
    )  # fmt: skip
    return {"study": study, "question": question, "variant": variant, "rater": rater, "vote": vote, "run": run,
            "config": config}  # fmt: skip


def _visit(page, url: str, dialogs: list) -> dict:
    response = page.goto(url)
    assert response.status < 500, f"{url}: {response.status}"
    page.wait_for_load_state("load")
    page.mouse.move(200, 300)  # hover payloads
    page.keyboard.press("Tab")  # focus payloads
    page.wait_for_timeout(100)
    found = page.evaluate(INSPECT)
    found["dialogs"] = list(dialogs)
    found["status"] = response.status
    return found


def test_no_payload_runs_or_survives_on_any_page_that_shows_it(live_server, poisoned):
    s = poisoned
    staff_pages = [
        "/admin/annotations/study/", f"/admin/annotations/study/{s['study'].pk}/change/",
        "/admin/annotations/question/", f"/admin/annotations/question/{s['question'].pk}/change/",
        "/admin/annotations/answer/", f"/admin/annotations/answer/{s['variant'].pk}/change/",
        "/admin/annotations/comparisonitem/",
        "/admin/annotations/rater/", f"/admin/annotations/rater/{s['rater'].pk}/change/",
        "/admin/annotations/vote/", f"/admin/annotations/vote/{s['vote'].pk}/change/",
        "/admin/annotations/judge/", "/admin/judges/llmjudge/", f"/admin/judges/llmjudge/{s['config'].pk}/change/",
        "/admin/judges/judgerun/", f"/admin/judges/judgerun/{s['run'].pk}/change/",
        f"/admin/perturbations/perturbationstudy/{s['study'].pk}/review/",
        "/admin/perturbations/variant/", f"/admin/perturbations/variant/{s['variant'].pk}/change/",
    ]  # fmt: skip
    rater_pages = ["/", "/s/xss/", "/s/xss/task/", "/s/xss/done/"]
    results = {}
    with chromium() as browser:
        context = browser.new_context()
        context.add_init_script(WATCH_CSP)
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        # The rater pages, as a rater who enters, rates the one item and finishes.
        results["/s/xss/"] = _visit(page, live_server.url + "/s/xss/", dialogs)
        page.get_by_label("Your participant id").fill("browser-xss")
        page.get_by_label("I have read the information above").check()
        page.get_by_role("button", name="Start rating").click()
        page.wait_for_url("**/task/")
        results["/s/xss/task/"] = _visit(page, live_server.url + "/s/xss/task/", dialogs)
        page.get_by_role("button", name="About the same").click()
        page.wait_for_url("**/done/")
        results["/s/xss/done/"] = _visit(page, live_server.url + "/s/xss/done/", dialogs)
        results["/"] = _visit(page, live_server.url + "/", dialogs)
        # The staff pages.
        context.add_cookies([session_cookie(make_staff(), live_server.url)])
        for path in staff_pages:
            results[path] = _visit(page, live_server.url + path, dialogs)
        context.close()

    assert set(results) == set(rater_pages + staff_pages)
    failures = {
        path: found
        for path, found in results.items()
        if found["xss"] or found["csp"] or found["bad"] or found["dialogs"]
    }
    assert not failures, failures
    # The payloads were there to be defused: the answers' plain text made it to the page.
    assert Answer.objects.filter(text__contains="onerror").exists()
