"""JAAS configuration text as Kafka writes it, parsed as Kafka's ``JaasConfig`` parses it.

Shared by both sides (Kafka keeps ``JaasConfig`` in its clients' common security package too):
the client reads ``sasl.jaas.config`` (exactly one login module, :mod:`oncelog.client.security`),
the broker reads ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (PLAIN's
``user_<name>="<password>"`` options, :mod:`oncelog.security.sasl`).

Grammar (``java.io.StreamTokenizer`` as JaasConfig configures it)::

    config  = entry { entry }
    entry   = login-module-class control-flag { key "=" value } ";"
    flag    = required | requisite | sufficient | optional        (any case)
    value   = quoted string ('...' or "...", backslash escapes) | bare word

Words are letters, digits and ``. - _ $``; ``//`` and ``/* */`` are comments. No values are
logged or echoed in errors (they are passwords).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.java_strings import TOKENIZER, unescape

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    """The text is not a JAAS configuration; the message names the problem, never a value."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str]


def jaas_tokens(text: str):
    """Tokens as Kafka's JaasConfig reads them with java.io.StreamTokenizer: words (letters,
    digits, ``. - _ $``), quoted strings (single or double quotes, backslash escapes, ending at
    the closing quote or the end of the line), ``//`` and ``/* */`` comments, single characters.
    Yields ``(kind, text)`` with kind ``"word"``, ``"string"`` or ``"char"``."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] not in "\r\n":
                j += 2 if text[j] == "\\" else 1  # an escaped quote or line end does not end it
            j = min(j, n)
            yield "string", unescape(text[i + 1:j], TOKENIZER)
            i = j + 1  # the closing quote (or the line end)
        elif c.isalnum() or c in "._-$" or "\u00a0" <= c <= "\u00ff":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "._-$" or "\u00a0" <= text[j] <= "\u00ff"):
                j += 1
            yield "word", text[i:j]
            i = j
        else:
            yield "char", c
            i += 1


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    """Every ``<LoginModule> <flag> key=value ... ;`` entry of ``text``, in order (possibly
    none: callers decide how many they accept). Raises :class:`JaasConfigError`."""
    tokens = list(jaas_tokens(text or ""))
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind != "word":
            raise JaasConfigError(f"expected a login module class, found {module!r}")
        if pos + 1 >= len(tokens):
            raise JaasConfigError("login module control flag not specified "
                                  "(e.g. '... ScramLoginModule required username=\"u\" password=\"p\";')")
        flag = tokens[pos + 1][1]
        if flag.lower() not in CONTROL_FLAGS:
            raise JaasConfigError(f"invalid control flag {flag!r} (expected one of {', '.join(CONTROL_FLAGS)})")
        pos += 2
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos] != ("char", ";"):
            kind, key = tokens[pos]
            if kind == "char":
                raise JaasConfigError(f"unexpected {key!r} in the options of {module}")
            if pos + 2 >= len(tokens) or tokens[pos + 1] != ("char", "=") or tokens[pos + 2][0] == "char":
                raise JaasConfigError(f"value not specified for key {key!r}")
            options[key] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise JaasConfigError("entry not terminated by a semicolon")
        pos += 1
        entries.append(JaasEntry(module, flag.lower(), options))
    return entries


def login_module_matches(module: str, name: str) -> bool:
    """Whether ``module`` is the login module class ``name``, shaded or not
    (``kafkashaded.org.apache.kafka...``: vendors relocate Kafka's packages)."""
    return module == name or module.endswith("." + name)
