import pytest

from biasstudy.rendering import render_markdown


def test_markdown_structure_survives():
    html = render_markdown("### Title\n\n**bold** and *em*\n\n- one\n- two\n\n`code` 🌍")
    for fragment in ("<h3>Title</h3>", "<strong>bold</strong>", "<em>em</em>", "<li>one</li>", "<code>code</code>", "🌍"):
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
