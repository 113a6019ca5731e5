from django import template

from analysis import stats

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


@register.filter
def pval(value) -> str:
    """A p-value: "< 0.001" below that, never "0.000"; empty when there is no test."""
    return stats.format_p(None if value is None or value == "" else float(value))


@register.filter
def ci(pair) -> str:
    """An interval [lo, hi] of shares as " [12.3%, 45.6%]"; empty when undefined."""
    if not pair or pair[0] is None:
        return ""
    return f"[{pct(pair[0])}, {pct(pair[1])}]"


@register.filter
def signed_ci(pair) -> str:
    if not pair or pair[0] is None:
        return ""
    return f"[{signed_pct(pair[0])}, {signed_pct(pair[1])}]"


@register.filter
def join_list(value) -> str:
    """A list as "a, b"; anything else as its text."""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


@register.filter
def dict_get(mapping: dict, key: str):
    """mapping[key] in a template, where the key is a variable."""
    return mapping.get(key)


@register.filter
def duration_s(seconds) -> str:
    """Seconds as "1 h 02 min", "12 min 05 s" or "42 s"."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"
