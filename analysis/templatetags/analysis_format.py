from django import template

register = template.Library()


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.1234 → "12.3%"; undefined stays visibly undefined."""
    if value is None or value == "":
        return "n/a"
    return f"{100 * float(value):.{int(digits)}f}%"


@register.filter
def signed_pct(value) -> str:
    if value is None:
        return "n/a"
    return f"{100 * float(value):+.1f} pt"


@register.filter
def num(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def words(value: str) -> str:
    """A snake_case key as words: "flagged_rater" → "flagged rater"."""
    return str(value).replace("_", " ")
