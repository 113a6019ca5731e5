from annotations import lengths


def test_words_are_whitespace_tokens():
    assert lengths.count_words("  one\ttwo\nthree  ") == 3


def test_chars_count_every_character():
    assert lengths.count_chars("héllo 🌍") == 7


def test_bpe_counts_tokens_when_the_local_tokenizer_is_installed():
    if not lengths.bpe_available():
        # The BPE measure is optional by design; the install scripts provide it.
        assert lengths.count_bpe("hello") is None
        return
    short = lengths.count_bpe("Water boils.")
    long = lengths.count_bpe("Water boils at one hundred degrees Celsius at sea level.")
    assert 0 < short < long


def test_spaces_are_the_pieces_between_single_spaces():
    # The verbosity blog post's tokens: a line break joins, a second space adds an empty piece.
    assert lengths.count_spaces("one two\nthree") == 2
    assert lengths.count_spaces("one  two") == 3
    assert lengths.count_words("one two\nthree") == 3
