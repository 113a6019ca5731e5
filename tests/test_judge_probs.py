import math

import pytest

from judges.probs import TokenLogprob, option_probs
from judges.prompts import label_scheme

ln = math.log


def test_it_follows_a_shared_prefix_and_multiplies_along_the_path():
    tokens = [
        TokenLogprob("Answer", ln(0.9), (("Answer", ln(0.9)), ("Tie", ln(0.1)))),
        TokenLogprob("1", ln(0.75), (("1", ln(0.75)), ("2", ln(0.25)))),
    ]
    probs = option_probs(tokens, label_offset=0, scheme=label_scheme("answer12"))
    assert probs == pytest.approx({"first": 0.675, "second": 0.225, "tie": 0.1})
    assert sum(probs.values()) == pytest.approx(1.0)


def test_it_starts_at_the_label_and_ignores_tokens_that_name_no_option():
    scheme = label_scheme("ab")
    tokens = [
        TokenLogprob("Verdict:", 0.0, ()),
        TokenLogprob(" B", ln(0.6), ((" B", ln(0.6)), (" A", ln(0.3)), (" Both", ln(0.05)), (" **", ln(0.05)))),
    ]
    probs = option_probs(tokens, label_offset=len("Verdict: "), scheme=scheme)
    assert probs == pytest.approx({"first": 1 / 3, "second": 2 / 3, "tie": 0.0})


def test_it_gives_nothing_when_no_alternative_names_an_option():
    tokens = [TokenLogprob("Hmm", 0.0, (("Hmm", 0.0),))]
    assert option_probs(tokens, label_offset=0, scheme=label_scheme("ab")) is None
    assert option_probs(tokens, label_offset=99, scheme=label_scheme("ab")) is None


def test_with_the_labels_swapped_the_probabilities_stay_by_position_as_shown():
    tokens = [TokenLogprob("B", ln(0.6), (("B", ln(0.6)), ("A", ln(0.3)), ("Tie", ln(0.1))))]
    probs = option_probs(tokens, label_offset=0, scheme=label_scheme("ab").in_order("ba"))
    assert probs == pytest.approx({"first": 0.6, "second": 0.3, "tie": 0.1})
