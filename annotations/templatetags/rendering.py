from django import template
from django.utils.safestring import SafeString

from biasstudy.rendering import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """`{{ answer.text|markdown }}`: rendered and sanitised (see biasstudy.rendering)."""
    return render_markdown(text)
