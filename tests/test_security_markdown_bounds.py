"""Markdown rendering is bounded: inputs on which Python-Markdown, bleach or linkify are
superlinear are shown as escaped plain text, quickly, and stay sanitised; ordinary markdown
renders as before."""

import time

import pytest

from biasstudy.rendering import (
    MAX_MARKDOWN_CHARS,
    MAX_TEXT_CHARS,
    markup_scan_cost,
    render_markdown,
    renders_as_markdown,
)

ADVERSARIAL = {
    "unclosed links": "[a](" * 5_000,
    "open brackets": "[" * 20_000,
    "open parentheses": "(" * 20_000,
    "unclosed tags": "<a" * 10_000,
    "images": "![" * 10_000,
    "footnote references": "[^" * 10_000,
    "brackets before a long paragraph": "[" * 50 + "x " * 9_000,
    "unclosed tags before a long text": "<a" * 300 + "\n\n" + "x " * 9_000,
    "nested brackets": "[" * 2_000 + "]" * 2_000,
    "emphasis": "*a" * 10_000,
    "nested quotes": ">" * 5_000 + " a",
    "a wide table": "|a" * 3_000 + "\n" + "|-" * 3_000,
    "footnotes": "".join(f"[^a{i}]: b\n\n" for i in range(1_000)) + "x[^a1]" * 1_000,
    "abbreviations": "".join(f"*[a{i}]: b\n" for i in range(700)) + "\n\n" + "x " * 5_000,
    "scripts among brackets": "<script>alert(1)</script>" + "[" * 20_000 + '<img src=x onerror="alert(1)">',
    "too long": "word " * (MAX_MARKDOWN_CHARS // 5 + 1),
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_markdown_renders_within_a_second_as_sanitised_plain_text(text):
    started = time.perf_counter()
    html = render_markdown(text)
    assert time.perf_counter() - started < 1.0
    assert not renders_as_markdown(text)
    # Nothing but paragraphs and line breaks: every "<" and ">" of the text is escaped.
    bare = html.replace("<p>", "").replace("</p>", "").replace("<br>", "")
    assert "<" not in bare and ">" not in bare
    assert html.startswith("<p>") and len(html) >= len(text.strip())


def test_plain_text_keeps_paragraphs_and_line_breaks_and_escapes_everything():
    text = "[" * 200 + "\n\n<b>bold</b> & co\nnext line"
    assert render_markdown(text) == "<p>" + "[" * 200 + "</p>\n<p>&lt;b&gt;bold&lt;/b&gt; &amp; co<br>\nnext line</p>"


def test_ordinary_markdown_still_renders_as_markdown():
    text = "## Steps\n\n1. Open [the docs](https://example.org) (see *below*).\n2. Run `make`.\n\n> Note: [1]\n"
    assert renders_as_markdown(text)
    html = render_markdown(text)
    assert "<h2>Steps</h2>" in html and 'href="https://example.org"' in html and "<em>below</em>" in html


@pytest.mark.parametrize(
    ("text", "cost"),
    [
        ("plain text, no brackets", 0),
        ("[a](b)", 2 + 3),  # "[" to "](" is 2, "](" to ")" is 3
        ("<b>x</b>", 2 + 3),
        ("[ab", 3),  # unmatched: to the end of the paragraph
        ("[ab\n\ncd", 3),  # ... not beyond it
        ("<ab\n\ncd", 7),  # an unclosed "<" reaches the end of the text
        ("[[]]", 3 + 1),
    ],
)
def test_the_scan_cost_is_the_distance_each_opener_travels(text, cost):
    assert markup_scan_cost(text) == cost


def test_the_longest_answers_of_the_published_data_sizes_render_as_markdown():
    # The longest MT-bench answer has 5,554 characters; one as long with its share of markup.
    text = ("Here is **one** step with `code` and a [link](https://example.org).\n\n" * 80)[:5_554]
    assert renders_as_markdown(text)


def test_the_admin_edit_form_holds_no_more_than_one_field_may_hold():
    from perturbations.forms import EditForm

    assert EditForm({"text": "a" * MAX_TEXT_CHARS}).is_valid()
    too_long = EditForm({"text": "a" * (MAX_TEXT_CHARS + 1)})
    assert not too_long.is_valid() and "text" in too_long.errors
