import pytest

from judges.prompts import (
    DEFAULT_SYSTEM_TEMPLATE,
    DEFAULT_USER_TEMPLATE,
    LabelScheme,
    PromptError,
    PromptStyle,
    check_template,
    label_scheme,
    render_messages,
    vote_grammar,
)


def render(style="vote_only", scheme="answer12", **kw):
    kw.setdefault("question", "Why is the sky blue?")
    kw.setdefault("first", "Rayleigh scattering.")
    kw.setdefault("second", "Because of {the sea}.")
    return render_messages(
        system_template=DEFAULT_SYSTEM_TEMPLATE,
        user_template=DEFAULT_USER_TEMPLATE,
        style=style,
        scheme=label_scheme(scheme),
        **kw,
    )


def test_it_shows_the_answers_in_the_given_order_under_the_scheme_labels():
    system, user = render(scheme="ab")
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"].index("[A]\nRayleigh scattering.") < user["content"].index("[B]\nBecause of {the sea}.")
    assert "A, B or Tie" in user["content"]


def test_the_default_wording_states_the_rules_of_the_study():
    text = DEFAULT_SYSTEM_TEMPLATE.lower()
    for rule in ("correct", "formatting", "tone", "order", "tie"):
        assert rule in text


def test_each_style_says_where_the_vote_goes():
    assert "Nothing else" in render("vote_only")[1]["content"]
    assert "last line" in render("explain_then_vote")[1]["content"]
    assert "first line" in render("vote_then_explain")[1]["content"]


def test_a_blank_system_template_sends_only_the_user_message():
    messages = render_messages(
        system_template=" ",
        user_template="{question}",
        style="vote_only",
        question="Q",
        first="a",
        second="b",
        scheme=label_scheme("ab"),
    )
    assert messages == [{"role": "user", "content": "Q"}]


def test_it_names_unknown_template_fields_and_where_they_are():
    with pytest.raises(PromptError, match=r"user_template: unknown field\(s\) \{answer\}"):
        check_template("{question} {answer}", where="user_template")
    with pytest.raises(PromptError, match="system_template"):
        check_template("a { b", where="system_template")
    check_template(DEFAULT_USER_TEMPLATE, where="user_template")


def test_it_rejects_an_unknown_label_scheme():
    with pytest.raises(PromptError, match="unknown label scheme 'xy'"):
        label_scheme("xy")


@pytest.mark.parametrize("style", PromptStyle.values)
def test_the_vote_grammar_names_every_label_and_llama_cpp_accepts_it(style):
    llama_cpp = pytest.importorskip("llama_cpp")
    scheme = LabelScheme("odd", 'say "one"', "back\\slash", "Tie")
    grammar = vote_grammar(style=style, scheme=scheme)
    assert 'vote ::= "say \\"one\\"" | "back\\\\slash" | "Tie"' in grammar
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # raises on a grammar it cannot read


def test_the_vote_grammar_refuses_an_unknown_style():
    with pytest.raises(PromptError, match="unknown prompt style"):
        vote_grammar(style="poem", scheme=label_scheme("ab"))


def test_a_reversed_label_order_shows_the_first_answer_under_the_second_label():
    messages = render_messages(
        system_template=DEFAULT_SYSTEM_TEMPLATE,
        user_template=DEFAULT_USER_TEMPLATE,
        style="vote_only",
        scheme=label_scheme("ab").in_order("ba"),
        question="Why is the sky blue?",
        first="Rayleigh scattering.",
        second="Because of the sea.",
    )
    user = messages[1]["content"]
    assert user.index("[B]\nRayleigh scattering.") < user.index("[A]\nBecause of the sea.")
    assert "B, A or Tie" in user


def test_label_orders_are_ab_or_ba_only():
    scheme = label_scheme("symbols")
    assert scheme.in_order("ab") == scheme
    assert scheme.in_order("ba").labels() == {"first": "Square", "second": "Circle", "tie": "Tie"}
    with pytest.raises(PromptError, match="label order 'xy'"):
        scheme.in_order("xy")
