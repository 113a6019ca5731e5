"""Templates a researcher writes, filled with values: `{name}` fields and nothing else. Pure: no
Django, no I/O.

Text a researcher writes is data, never code, so it is never given to `str.format`, whose
fields also convert (`{A2!r}`), format (`{A2:>20000000}` pads to 20 MB; `{A2:{A1}}` takes its
format from another field and fails when the page is drawn), and reach into attributes and
items (`{A2.x}`, `{A2[0]}`). Here a field is a name in braces; `{{` and `}}` are literal braces,
as in `str.format`, so a template that `check` accepts reads exactly as `str.format` would
render it.

`check` is the rule on the way in: it refuses anything but names (saying which field and what
to write instead), names not allowed, and a lone brace. `substitute` is how a template is
filled, and can do nothing but put values in place of names: it also fills a template stored
before this rule existed, which `check` would refuse, without failing: a field that names a
known value with a conversion, format or attribute after the name (`{A2:{A1}}`, `{A2!r}`) is
filled with the bare value (what follows the name is dropped), and anything else (an unknown
name, `{0}`, a lone brace) stays as written. Its output is at most the template plus one value
per field, whatever the template says.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# One token at a time, left to right: an escaped brace, or a field. A field's "rest" (after its
# name) is what str.format would read as a conversion, format, attribute or index, with at
# most one level of nested braces (`{A2:{A1}}`), as str.format allows.
_TOKEN = re.compile(r"(?P<escape>\{\{|\}\})|\{(?P<name>" + _NAME + r")(?P<rest>(?:[^{}]|\{[^{}]*\})*)\}")
# What `check` reads: an escape, a bare field, any other field (to name it), or a lone brace.
_STRICT = re.compile(r"\{\{|\}\}|\{(?P<field>[^{}]*(?:\{[^{}]*\}[^{}]*)*)\}|(?P<lone>[{}])")


class PlaceholderError(ValueError):
    """What is wrong with a template, in words a researcher can act on."""


def names(template: str) -> set[str]:
    """The names `substitute` would fill in `template` (any template, checked or not)."""
    return {match["name"] for match in _TOKEN.finditer(template) if match["name"]}


def check(template: str, *, allowed: Collection[str]) -> set[str]:
    """The names `template` uses; raise PlaceholderError when a field is anything but one of
    `allowed` in braces, or a brace is neither a field's nor doubled."""
    used: set[str] = set()
    unknown: list[str] = []
    for match in _STRICT.finditer(template):
        if match["lone"]:
            raise PlaceholderError(
                f"a lone {match['lone']!r} at character {match.start() + 1}: write a literal brace as {{{{ or }}}}"
            )
        field = match["field"]
        if field is None:
            continue
        name = re.match(_NAME, field)
        if name is None or name.end() != len(field):
            raise PlaceholderError(_not_a_name(field, name.group() if name else None, allowed))
        if field not in allowed:
            unknown.append(field)
        used.add(field)
    if unknown:
        raise PlaceholderError(
            f"unknown field(s) {', '.join(sorted({'{' + f + '}' for f in unknown}))}; allowed: {_listed(allowed)}"
        )
    return used


def _not_a_name(field: str, name: str | None, allowed: Collection[str]) -> str:
    shown = "{" + field + "}"
    if name is None:
        return f"{shown} is not a field: a field is a name in braces, one of {_listed(allowed)}"
    after = field[len(name)]
    what = {"!": "a conversion", ":": "a format", ".": "an attribute", "[": "an index"}.get(after, "extra characters")
    return (
        f"{shown} has {what} after the name: a field is only a name in braces, such as {{{name}}} "
        "(nothing after the name; write a literal brace as {{ or }})"
    )


def _listed(allowed: Collection[str]) -> str:
    return ", ".join("{" + name + "}" for name in sorted(allowed))


def substitute(template: str, values: Mapping[str, str]) -> str:
    """`template` with each field that names a key of `values` replaced by its value (as text)
    and `{{`/`}}` by one brace; see the module's docstring for templates `check` refuses."""

    def fill(match: re.Match) -> str:
        if match["escape"]:
            return match["escape"][0]
        if match["name"] in values:
            return str(values[match["name"]])
        return match.group()

    return _TOKEN.sub(fill, template)
