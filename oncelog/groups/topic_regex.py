"""Server-side regular expressions of KIP-848 consumer groups (``subscribed_topic_regex``).

Kafka 4.4 validates a member's regex with RE2J's ``Pattern.compile(regex)`` (the heartbeat fails
with INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `<regex>` is not a valid regular
expression: <description>.") and resolves it by scanning every topic name in the metadata image
with ``pattern.matcher(topic).matches()`` — a match of the whole name, not a search. RE2J is a
port of RE2, so we use RE2 itself (the ``google-re2`` wheel): the same syntax, linear-time
matching whatever the pattern, and the same refusals — no backreferences, no lookaround, no
possessive quantifiers, repeat counts up to 1000.

Where RE2 and RE2J differ we side with RE2J (see :func:`_for_re2`; found by running thousands
of random patterns through both this module and Kafka 4.4's ``re2j-1.8.jar``): ``\\C`` and a
literal ``{`` followed by a repetition operator are refused, a backslash before a non-ASCII
character is a literal. One difference remains, on the strict side: RE2 refuses nested repeats
whose counts multiply past 1000 (``(a{500}){3}``), which RE2J accepts.

Internal topics: Kafka 4.4 does not leave them out — ``.*`` matches ``__consumer_offsets`` and a
member subscribed to it is assigned that topic's partitions (seen against Kafka 4.4 with
confluent-kafka). :func:`matching_topics` does the same unless asked to ``exclude_internal``.
What a regex matches is not yet what it subscribes to: with an authorizer, the coordinator keeps
only the topics the resolving member's principal may DESCRIBE (Kafka's
TopicRegexResolver.filterTopicDescribeAuthorizedTopics; ``ConsumerAssignment.resolve_regexes``).

Deliberately stricter than Kafka: a pattern longer than :data:`MAX_PATTERN_LENGTH` characters is
refused as invalid (RE2 bounds time, this bounds what one heartbeat can make us compile), and so
is one whose compiled program would exceed RE2's default memory budget (8 MiB).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

import re2

from ..errors import InvalidRegularExpression

MAX_PATTERN_LENGTH = 1000

# Kafka's Topic.INTERNAL_TOPICS: the group and transaction coordinators' topics.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise write every bad pattern to the broker's stderr


def _invalid(pattern: str, description: str) -> InvalidRegularExpression:
    shown = pattern if len(pattern) <= 100 else pattern[:100] + "..."
    return InvalidRegularExpression(
        f"SubscribedTopicRegex `{shown}` is not a valid regular expression: {description}."
    )


_REPEAT = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")


def _for_re2(pattern: str) -> tuple[str, str | None]:
    """The pattern as RE2 should read it, and RE2J's description if RE2J refuses it.

    Three places where RE2J (Kafka) and RE2 part ways, all outside ``\\Q...\\E``:

    * ``\\C`` (any byte): RE2 accepts it, RE2J refuses it ("invalid escape sequence");
    * a ``{`` that starts no repeat (so a literal) directly followed by a repetition operator
      (``{+``, ``{*``, ``{?``, ``{{2}``): RE2J's parser counts the literal as a repeat and reports
      "invalid nested repetition operator"; RE2 applies the operator to the literal;
    * a backslash before a non-ASCII character: RE2J reads the character as a literal, RE2
      refuses the escape — so we drop such backslashes.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        char = pattern[i]
        if char == "\\":
            following = pattern[i + 1 : i + 2]
            if following == "C":
                return pattern, "invalid escape sequence"
            if following == "Q":
                end = pattern.find("\\E", i + 2)
                stop = n if end < 0 else end + 2
                out.append(pattern[i:stop])
                i = stop
                continue
            out.append(following if following and not following.isascii() else pattern[i : i + 2])
            i += 2
        elif in_class:
            if pattern.startswith("[:", i):  # [:alpha:] inside a class
                end = pattern.find(":]", i + 2)
                stop = i + 1 if end < 0 else end + 2
                out.append(pattern[i:stop])
                i = stop
                continue
            if char == "]":
                in_class = False
            out.append(char)
            i += 1
        elif char == "[":
            in_class = True
            start = i
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):  # a leading ] is a literal member
                i += 1
            out.append(pattern[start:i])
        elif char == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat:
                out.append(repeat.group())
                i = repeat.end()
                continue
            following = pattern[i + 1 : i + 2]
            if following in ("*", "+", "?") or _REPEAT.match(pattern, i + 1):
                return pattern, "invalid nested repetition operator"
            out.append(char)
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out), None


# RE2's error strings, as RE2J (Go's regexp/syntax) words them: Kafka sends RE2J's.
_RE2J_DESCRIPTIONS = {
    "no argument for repetition operator": "missing argument to repetition operator",
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "regexp/syntax: internal error",  # sic: RE2J 1.8's text for a stray )
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "bad repetition operator": "invalid nested repetition operator",
    "trailing \\": "trailing backslash at end of expression",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
}


def compile_topic_regex(pattern: str) -> Callable[[str], bool]:
    """A predicate: does a topic name match ``pattern`` in full (RE2J ``matches()``)?

    Raises :class:`~oncelog.errors.InvalidRegularExpression` for a pattern RE2J would reject, or
    one longer than :data:`MAX_PATTERN_LENGTH` characters.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise _invalid(pattern, f"longer than {MAX_PATTERN_LENGTH} characters")
    rewritten, refused = _for_re2(pattern)
    if refused:
        raise _invalid(pattern, refused)
    try:
        compiled = re2.compile(rewritten, _OPTIONS)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for RE2
        raise _invalid(pattern, "invalid UTF-8") from None
    except re2.error as exc:
        # RE2 says "invalid escape sequence: \1"; RE2J's description (what Kafka reports) is
        # the part before the colon, sometimes in other words.
        detail = exc.args[0] if exc.args else b""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        code, _, culprit = str(detail).partition(": ")
        description = _RE2J_DESCRIPTIONS.get(code, code or "invalid pattern")
        if code == "invalid perl operator" and culprit.startswith("(?<"):
            description = "invalid named capture"  # lookbehind: RE2J reads (?< as a named group
        raise _invalid(pattern, description) from None

    def matches(topic: str) -> bool:
        try:
            return compiled.fullmatch(topic) is not None
        except UnicodeEncodeError:  # not a name any topic can have
            return False

    return matches


def matching_topics(
    patterns: Iterable[str], names: Iterable[str], *, exclude_internal: bool = False
) -> dict[str, frozenset[str]]:
    """Each pattern's matching topic names, as Kafka's ``TopicRegexResolver`` resolves a group's
    regexes against the metadata image. A pattern that does not compile resolves to no topics (Kafka
    logs and ignores it: the heartbeat that brought it was already refused). With
    ``exclude_internal``, :data:`INTERNAL_TOPICS` and every other ``__``-prefixed name are left
    out — not Kafka's behaviour, see the module docstring."""
    candidates = [n for n in dict.fromkeys(names) if not (exclude_internal and n.startswith("__"))]
    resolved: dict[str, frozenset[str]] = {}
    for pattern in dict.fromkeys(patterns):
        try:
            matches = compile_topic_regex(pattern)
        except InvalidRegularExpression:
            resolved[pattern] = frozenset()
            continue
        resolved[pattern] = frozenset(n for n in candidates if matches(n))
    return resolved
