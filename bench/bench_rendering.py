"""Markdown rendering per text, today's pipeline against the two-pass one it replaced.

    python bench/bench_rendering.py                 # the demo study and the chen2024 data set
    python bench/bench_rendering.py --rounds 5 --chen /path/to/humans_llms_judgement_bias

Every question and answer text of the demo study (fixtures/demo_study.json), of the chen2024
data set and of bench_import_lock's synthetic answers, plus a few texts aimed at the link and
entity handling, is rendered by both pipelines:

- before: a new `Markdown` per call, `Cleaner.clean`, then `bleach.linkify` (a second html5lib
  parse of the cleaned HTML, with a new parser each call);
- now: `rendering._render` (one converter and one cleaner per thread, links found in the
  cleaning parse by bleach's `LinkifyFilter`).

It prints how many renders differ (with the first few differences) and the CPU time per text
of each pipeline on the chen2024 texts and on bench_import_lock's 2 KB answers: the rounds
alternate before / now so that both meet the same machine load; the median round is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bleach  # noqa: E402
import markdown as md  # noqa: E402

from biasstudy import rendering  # noqa: E402
from biasstudy.datasets import dataset_path  # noqa: E402

CHEN = dataset_path("humans_llms_judgement_bias")
# Where the two pipelines could part: bare links among entities, links in code, raw HTML links.
EDGE_CASES = [
    "See https://example.org/?a=1&b=2 and www.example.com/x_(y) now.",
    "Mail me at someone@example.org or visit example.org.",
    "`https://example.org/in-code` and\n\n    https://example.org/in-a-block\n",
    '<a href="https://example.org" rel="opener" target="_self">raw</a> &amp; &lt;b&gt; &copy; &#169; &bogus;',
    '[text](https://example.org "title") <https://example.org/auto> <someone@example.org>',
    "ftp://example.org/file and javascript:alert(1) and data:text/html,<b>x</b>",
    "Footnote[^1] and *[HTML]: Hyper Text\n\n[^1]: https://example.org/note\n\nHTML here.",
    "| url | x |\n|---|---|\n| https://example.org | `a&b` |",
    "<details><summary>s</summary>https://example.org</details>",
    "A < B & C > D, 2 < 3 and https://example.org/<script>",
]


def two_pass(text: str) -> str:
    """The render before 2026-11-25: what `rendering._render` returned for the same text."""
    if not rendering.renders_as_markdown(text):
        return rendering._plain(text)
    html = md.markdown(text, extensions=rendering._EXTENSIONS, output_format="html")
    cleaned = bleach.Cleaner(
        tags=rendering.ALLOWED_TAGS,
        attributes={**rendering.ALLOWED_ATTRIBUTES, "a": ["href", "title", "rel", "target"]},
        protocols=rendering.ALLOWED_PROTOCOLS,
        strip=True,
        strip_comments=True,
    ).clean(html)
    return bleach.linkify(cleaned, callbacks=[rendering._set_link_rel], skip_tags={"pre", "code"}, parse_email=False)


def demo_texts() -> list[str]:
    document = json.loads((ROOT / "fixtures" / "demo_study.json").read_text(encoding="utf-8"))
    texts = []
    for question in document["questions"]:
        texts += [question["text"]] + [answer["text"] for answer in question["answers"]]
    for gold in document.get("gold_items", []):
        texts += [gold["text"], gold["better"], gold["worse"]]
    return texts


def chen_texts(folder: Path) -> list[str]:
    texts = []
    for file in sorted(folder.glob("*.json")):
        for line in file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                texts += [row["question"]] + [answer["answer"] for answer in row["answers"].values()]
    return texts


def cpu_per_text(render, texts: list[str]) -> float:
    started = time.process_time()
    for text in texts:
        render(text)
    return (time.process_time() - started) / len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chen", type=Path, default=CHEN, help="the chen2024 folder (raw.json and the perturbations)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from bench.bench_import_lock import document

    synthetic = [answer["text"] for question in document(0.2)["questions"] for answer in question["answers"]]
    corpora = {
        "demo": demo_texts(),
        "chen2024": chen_texts(args.chen),
        "bench_import_lock": synthetic,
        "edge cases": EDGE_CASES,
    }
    now = rendering._render
    for name, texts in corpora.items():
        unique = list(dict.fromkeys(texts))
        differing = [text for text in unique if two_pass(text) != now(text)]
        print(f"{name}: {len(unique)} distinct texts, mean {statistics.mean(map(len, unique)):.0f} characters,"
              f" {len(differing)} rendered differently")  # fmt: skip
        for text in differing[:3]:
            print(f"  text:   {text[:200]!r}\n  before: {two_pass(text)[:300]!r}\n  now:    {now(text)[:300]!r}")
    for name in ("chen2024", "bench_import_lock"):
        texts = list(dict.fromkeys(corpora[name]))
        before, after = [], []
        for _ in range(args.rounds):
            before.append(cpu_per_text(two_pass, texts))
            after.append(cpu_per_text(now, texts))
        result = {
            "corpus": name,
            "texts": len(texts),
            "mean_characters": round(statistics.mean(map(len, texts))),
            "rounds": args.rounds,
            "before_cpu_ms_per_text": round(1000 * statistics.median(before), 2),
            "now_cpu_ms_per_text": round(1000 * statistics.median(after), 2),
            "before_rounds_ms": [round(1000 * x, 2) for x in before],
            "now_rounds_ms": [round(1000 * x, 2) for x in after],
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
