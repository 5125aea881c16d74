"""Backslash escapes as Java reads them, in the two places Kafka's configuration meets them:

* :data:`PROPERTIES`: ``java.util.Properties.load`` (server.properties, client configs):
  ``\\t \\n \\r \\f``, ``\\uXXXX``;
* :data:`TOKENIZER`: ``java.io.StreamTokenizer``'s quoted strings (JAAS configuration, as
  Kafka's JaasConfig parses ``sasl.jaas.config``): ``\\a \\b \\f \\n \\r \\t \\v`` and octal
  ``\\0``-``\\377`` (three digits only when the first is 0-3, so ``\\477`` is ``\\47`` then ``7``).

In both, a backslash before any other character stands for that character, and a lone backslash
at the end is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    escapes: dict[str, str]  # the character after the backslash -> what it stands for
    unicode: bool = False  # \uXXXX (exactly four hex digits; otherwise the "u" stands for itself)
    octal: bool = False  # \ooo, as StreamTokenizer reads it


PROPERTIES = Dialect({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}, unicode=True)
TOKENIZER = Dialect({"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}, octal=True)

_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_OCTAL = re.compile(r"[0-3][0-7]{0,2}|[4-7][0-7]?")


def unescape(text: str, dialect: Dialect) -> str:
    """``text`` with its backslash escapes replaced as ``dialect`` reads them."""
    if "\\" not in text:
        return text
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 == n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if dialect.unicode and nxt == "u" and _HEX4.fullmatch(text, i + 2, i + 6):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        m = _OCTAL.match(text, i + 1) if dialect.octal else None
        if m:
            out.append(chr(int(m.group(0), 8)))
            i = m.end()
            continue
        out.append(dialect.escapes.get(nxt, nxt))
        i += 2
    return "".join(out)
