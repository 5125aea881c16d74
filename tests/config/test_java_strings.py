"""Java's backslash escapes, in its two dialects (oncelog.config.java_strings): what
``java.util.Properties.load`` and ``java.io.StreamTokenizer`` make of the same kinds of text."""

from __future__ import annotations

import pytest

from oncelog.config.java_strings import PROPERTIES, TOKENIZER, unescape
from oncelog.security.jaas import jaas_tokens


@pytest.mark.parametrize("raw, properties, tokenizer", [
    ("plain", "plain", "plain"),
    (r"a\tb\nc\rd\fe", "a\tb\nc\rd\fe", "a\tb\nc\rd\fe"),
    (r"\a\b\v", "abv", "\a\b\v"),  # Properties knows four letters only
    (r"\u0041\u00e9", "A\u00e9", "u0041u00e9"),  # \uXXXX is Properties' (the tokenizer reads "u")
    (r"\uZZ", "uZZ", "uZZ"),  # not four hex digits: the "u" stands for itself
    (r"\101\0\377", "1010377", "A\x00\xff"),  # octal is the tokenizer's
    (r"\477", "477", "'7"),  # three digits only after 0-3: \47 then 7, as StreamTokenizer
    (r"\x\\\"\=", 'x\\"=', 'x\\"='),  # any other character stands for itself
    ("end\\", "end\\", "end\\"),  # a lone backslash at the end is kept
])
def test_each_dialect_reads_escapes_as_java_does(raw, properties, tokenizer):
    assert unescape(raw, PROPERTIES) == properties
    assert unescape(raw, TOKENIZER) == tokenizer


def test_a_jaas_quoted_string_ends_at_its_unescaped_quote_or_the_line_end():
    text = 'M required a="x\\"y\\101" b=\'it\\\'s\' c="open\nd;'
    assert [v for kind, v in jaas_tokens(text) if kind == "string"] == ['x"yA', "it's", "open"]
