from concurrent.futures import ThreadPoolExecutor

import pytest

from biasstudy import rendering
from biasstudy.rendering import render_markdown


def test_markdown_structure_survives():
    html = render_markdown("### Title\n\n**bold** and *em*\n\n- one\n- two\n\n`code` 🌍")
    for fragment in (
        "<h3>Title</h3>",
        "<strong>bold</strong>",
        "<em>em</em>",
        "<li>one</li>",
        "<code>code</code>",
        "🌍",
    ):
        assert fragment in html


def test_tables_survive():
    html = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |")
    assert "<table>" in html and "<td>1</td>" in html


@pytest.mark.parametrize(
    "payload",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "<iframe src='https://example.org'></iframe>",
        "[click](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "<style>body{display:none}</style>",
        '<p onclick="alert(1)">hi</p>',
        '<svg onload="alert(1)"></svg>',
    ],
)
def test_dangerous_html_never_survives(payload):
    html = render_markdown(payload).lower()
    for forbidden in ("<script", "onerror", "onclick", "onload", "<iframe", "javascript:", "<style", "<svg", "<img"):
        assert forbidden not in html


def test_links_open_safely():
    html = render_markdown("[site](https://example.org)")
    assert 'href="https://example.org"' in html
    assert "noopener" in html


def test_bare_urls_become_safe_links_except_in_code():
    html = render_markdown("Read https://example.org/?a=1&b=2 now, not `https://example.org/code`.")
    assert '<a href="https://example.org/?a=1&amp;b=2" rel="nofollow noopener noreferrer" target="_blank">' in html
    assert "<code>https://example.org/code</code>" in html


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/file", "ssh://host.example.org", "irc://irc.example.org/#python", "data://example.org/x"],
)
def test_bare_urls_of_other_protocols_than_http_https_mailto_stay_text(url):
    assert render_markdown(f"Fetch {url} today.") == f"<p>Fetch {url} today.</p>"


def test_bare_http_https_and_mailto_urls_still_become_links_whatever_their_case():
    html = render_markdown("HTTP://EXAMPLE.ORG, https://example.org/a, mailto:me@example.org and example.org")
    for href in ("HTTP://EXAMPLE.ORG", "https://example.org/a", "mailto:me@example.org", "http://example.org"):
        assert f'<a href="{href}" rel="nofollow noopener noreferrer" target="_blank">' in html
    assert html.count("<a ") == 4


def test_an_ampersand_in_inline_code_is_escaped_once():
    assert render_markdown("Use `a&b` here.") == "<p>Use <code>a&amp;b</code> here.</p>"


def test_a_footnote_of_one_text_never_reaches_the_next():
    """The converter is reused between texts: a definition must not outlive its text."""
    assert "<sup>" in render_markdown("One[^n] note.\n\n[^n]: Defined here.")
    assert render_markdown("Two[^n] with no definition.") == "<p>Two[^n] with no definition.</p>"


def test_texts_rendered_in_several_threads_come_out_as_in_one():
    """Each thread renders with its own converter and cleaner (neither is thread-safe)."""
    render = rendering._render  # every call goes through the pipeline
    texts = [f"Text {i}: **bold**, a [link](https://example.org/{i}) and `code {i}`\n\n- item {i}" for i in range(300)]
    expected = [render(text) for text in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda k: [render(text) for text in texts[k::4]], range(4)))
    assert results == [expected[k::4] for k in range(4)]
