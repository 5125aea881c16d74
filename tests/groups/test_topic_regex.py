"""``subscribed_topic_regex`` (:mod:`oncelog.groups.topic_regex`): RE2J's syntax and refusals,
full-match semantics, Kafka's error message, the length bound, and resolution against topic
names (internal topics included, as Kafka 4.4 does, unless excluded).

The expectations are RE2J 1.8's (Kafka 4.4's jar): each pattern below was run through
``com.google.re2j.Pattern.compile`` and ``matcher(topic).matches()``.
"""

from __future__ import annotations

import pytest

from kio.schema.errors import ErrorCode

from oncelog.errors import InvalidRegularExpression, error_code_for
from oncelog.groups.topic_regex import (
    INTERNAL_TOPICS,
    MAX_PATTERN_LENGTH,
    compile_topic_regex,
    matching_topics,
)

TOPICS = ["a", "ab", "abc", "foo", "foo.bar", "foo-bar", "foo_bar", "FOO", "x1", "x12", "topic-10",
          "__consumer_offsets", "__transaction_state", "__my-topic"]

# (pattern, the topics RE2J's matches() accepts)
VALID = [
    ("foo.*", {"foo", "foo.bar", "foo-bar", "foo_bar"}),
    ("foo", {"foo"}),  # a full match: not foo.bar
    ("fo", set()),
    ("o.*", set()),  # not a search: nothing starts with o
    ("^foo$", {"foo"}),
    ("foo|a", {"foo", "a"}),
    ("a|ab", {"a", "ab"}),  # alternation under a full match: ab matches through the second branch
    ("(?i)foo", {"foo", "FOO"}),
    ("foo\\.bar", {"foo.bar"}),
    ("\\Qfoo.bar\\E", {"foo.bar"}),
    ("x\\d+", {"x1", "x12"}),
    ("x\\d{2}", {"x12"}),
    ("[[:alpha:]]+", {"a", "ab", "abc", "foo", "FOO"}),
    ("\\pL+", {"a", "ab", "abc", "foo", "FOO"}),
    ("(?P<name>ab)c?", {"ab", "abc"}),
    ("(?:a|b)+", {"a", "ab"}),
    ("a{,2}", set()),  # not a repeat in RE2J: the literal text "a{,2}"
    (".*-.*", {"foo-bar", "topic-10", "__my-topic"}),
    ("__.*", {"__consumer_offsets", "__transaction_state", "__my-topic"}),
    ("", set()),
    ("a\\é", set()),  # RE2J: a backslash before a non-ASCII character escapes a literal
    (".{1000}", set()),
]

# (pattern, RE2J's description, as Kafka puts it in the error message)
INVALID = [
    ("(a)\\1", "invalid escape sequence"),  # backreference
    ("a(?=b)", "invalid or unsupported Perl syntax"),  # lookahead
    ("a(?!b)", "invalid or unsupported Perl syntax"),
    ("(?<=a)b", "invalid named capture"),  # lookbehind: RE2J reads (?< as a named group
    ("a++", "invalid nested repetition operator"),  # possessive
    ("a**", "invalid nested repetition operator"),
    ("a{2}+", "invalid nested repetition operator"),
    ("a{1001}", "invalid repeat count"),
    ("(", "missing closing )"),
    ("[a", "missing closing ]"),
    ("*", "missing argument to repetition operator"),
    ("x\\", "trailing backslash at end of expression"),
    ("[z-a]", "invalid character class range"),
    ("\\p{Foo}", "invalid character class range"),
    ("\\Ca", "invalid escape sequence"),  # RE2 accepts \C (any byte); RE2J does not
    ("{+", "invalid nested repetition operator"),  # RE2 accepts: a literal { repeated
    ("a{{2}", "invalid nested repetition operator"),
    ("\\Z", "invalid escape sequence"),
]


@pytest.mark.parametrize("pattern, expected", VALID, ids=[p for p, _ in VALID])
def test_full_match(pattern, expected):
    matches = compile_topic_regex(pattern)
    assert {t for t in TOPICS if matches(t)} == expected


@pytest.mark.parametrize("pattern, description", INVALID, ids=[p for p, _ in INVALID])
def test_refused_as_re2j_refuses(pattern, description):
    with pytest.raises(InvalidRegularExpression) as raised:
        compile_topic_regex(pattern)
    assert str(raised.value) == (
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    )
    assert error_code_for(raised.value) == ErrorCode.invalid_regular_expression


def test_escapes_inside_literals_and_classes_are_not_misread():
    # \C and {+ only count outside \Q...\E; an escaped backslash before C is a backslash and a C.
    assert compile_topic_regex("\\Q\\C{+\\E")("\\C{+")
    assert compile_topic_regex("a\\\\C")("a\\C")
    assert compile_topic_regex("[{+]+")("{+")
    assert compile_topic_regex("\\{+")("{{")


def test_length_bound():
    longest = "a" * MAX_PATTERN_LENGTH
    assert compile_topic_regex(longest)(longest)
    with pytest.raises(InvalidRegularExpression, match="longer than 1000 characters"):
        compile_topic_regex(longest + "a")


def test_hostile_patterns_stay_linear():
    # Catastrophic for a backtracking engine; RE2 answers at once.
    matches = compile_topic_regex("(a*)*b")
    assert not matches("a" * 249)
    assert compile_topic_regex("(x+x+)+y")("x" * 200 + "y")
    assert compile_topic_regex("(a*)*b")("ab")


def test_lone_surrogate_is_invalid_not_a_crash():
    with pytest.raises(InvalidRegularExpression):
        compile_topic_regex("a\ud800")
    assert not compile_topic_regex(".*")("a\ud800")


def test_matching_topics_includes_internal_topics_as_kafka_does():
    """Kafka 4.4's TopicRegexResolver scans every topic name: ``.*`` gets __consumer_offsets
    (a confluent-kafka member subscribed to ``^.*`` is assigned its 50 partitions)."""
    resolved = matching_topics([".*", "foo.*", "(a)\\1", "foo.*"], TOPICS)
    assert set(resolved) == {".*", "foo.*", "(a)\\1"}
    assert resolved[".*"] == frozenset(TOPICS)
    assert INTERNAL_TOPICS <= resolved[".*"]
    assert resolved["foo.*"] == {"foo", "foo.bar", "foo-bar", "foo_bar"}
    assert resolved["(a)\\1"] == frozenset()  # Kafka logs and ignores a pattern that won't compile


def test_matching_topics_can_exclude_internal_topics():
    resolved = matching_topics([".*", "__.*"], TOPICS, exclude_internal=True)
    assert resolved[".*"] == frozenset(t for t in TOPICS if not t.startswith("__"))
    assert resolved["__.*"] == frozenset()
