from django import template
from django.utils.safestring import SafeString

from biasstudy.permissions import has_model_perms
from biasstudy.rendering import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """`{{ answer.text|markdown }}`: rendered and sanitised (see biasstudy.rendering)."""
    return render_markdown(text)


@register.filter
def may(user, perms: str) -> bool:
    """`{% if request.user|may:"annotations.view_rater" %}`: whether the user holds every one of
    the comma-separated model permissions, as the page behind a link checks them
    (biasstudy.permissions), so that a link is shown only to those it would not answer with 403."""
    return has_model_perms(user, [perm.strip() for perm in perms.split(",")])
