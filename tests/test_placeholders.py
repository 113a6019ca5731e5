"""biasstudy.placeholders: a researcher's template names values and nothing else. `check` refuses
every other field, naming it; `substitute` only puts values in place of names, reads a checked
template as `str.format` would, and fills any other text (a template stored before the rule)
without failing and without growing past one value per field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasstudy.placeholders import PlaceholderError, check, names, substitute

ALLOWED = {"A1", "A2", "judge_family"}
VALUES = {"A1": "Answer 1", "A2": "Answer 2", "judge_family": "Claude"}


@pytest.mark.parametrize(
    "template, said",
    [
        ("{A2:{A1}} was preferred by most readers.", "{A2:{A1}} has a format after the name"),
        ("{A2:>20000000} was preferred.", "{A2:>20000000} has a format after the name"),
        ("{A2!r} was preferred.", "{A2!r} has a conversion after the name"),
        ("{A2.upper} was preferred.", "{A2.upper} has an attribute after the name"),
        ("{A2[0]} was preferred.", "{A2[0]} has an index after the name"),
        ("{A2 } was preferred.", "{A2 } has extra characters after the name"),
        ("{} was preferred.", "{} is not a field"),
        ("{0} was preferred.", "{0} is not a field"),
        ("{B} was preferred.", "unknown field(s) {B}; allowed: {A1}, {A2}, {judge_family}"),
        ("{A2} was {preferred.", "a lone '{' at character 10"),
        ("{A2} was} preferred.", "a lone '}' at character 9"),
    ],
)
def test_check_refuses_anything_but_a_name_in_braces_and_says_which_field(template, said):
    with pytest.raises(PlaceholderError) as caught:
        check(template, allowed=ALLOWED)
    assert said in str(caught.value)


def test_check_accepts_names_and_doubled_braces_and_returns_the_names():
    assert check("{{A2}} is {A2}, {{not}} {A1}{{", allowed=ALLOWED) == {"A1", "A2"}
    assert check("no field at all", allowed=ALLOWED) == set()


_PIECES = st.sampled_from(["{A1}", "{A2}", "{judge_family}", "{{", "}}", "text", " ", "{{A2}}", "%s", "%(A2)s", "ü"])


@given(st.lists(_PIECES, max_size=12))
def test_a_checked_template_reads_as_str_format_would_render_it(pieces):
    template = "".join(pieces)
    check(template, allowed=ALLOWED)
    assert substitute(template, VALUES) == template.format(**VALUES)


def test_a_value_is_put_in_as_it_is_and_never_read_as_a_template():
    assert substitute("{A1} and {A2}", {"A1": "{A2}", "A2": "{{x}}"}) == "{A2} and {{x}}"


@pytest.mark.parametrize(
    "stored, filled",
    [
        ("{A2:{A1}} was preferred by most readers.", "Answer 2 was preferred by most readers."),
        ("{A2:>20000000} was preferred.", "Answer 2 was preferred."),
        ("{A2!r} and {A1.__class__} and {A2[0]}", "Answer 2 and Answer 1 and Answer 2"),
        ("{B} and {0} and {} and { and }", "{B} and {0} and {} and { and }"),
        ("{A2:{A1}{A1}}", "Answer 2"),
    ],
)
def test_a_template_stored_before_the_rule_is_filled_with_bare_values_or_left_as_written(stored, filled):
    assert substitute(stored, VALUES) == filled


@given(st.text(alphabet="{}:!.[]A12>0 x", max_size=60))
def test_substitute_never_fails_and_gives_at_most_one_value_per_field(template):
    filled = substitute(template, VALUES)
    longest = max(len(v) for v in VALUES.values())
    assert len(filled) <= len(template) * (1 + longest)


def test_names_are_what_substitute_fills():
    assert names("{A2:{A1}} by {judge_family!r}, not {other}") == {"A2", "judge_family", "other"}
