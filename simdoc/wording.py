"""Counts in messages: "1 pair", "2 pairs".

Every summary and warning on stderr says how many of something it saw; this
is the one place that decides the noun's form, so no message reads "1 pairs".
"""

from __future__ import annotations


def _plural_word(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"  # query, copy
    if word.endswith(("s", "sh", "ch", "x")):
        return word + "es"  # match, pass
    return word + "s"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``noun`` for one, its plural for any other count (``many``, else the usual English ending).

    >>> plural(1, "pair"), plural(0, "pair"), plural(2, "query"), plural(1, "file skipped")
    ('pair', 'pairs', 'queries', 'file skipped')
    """
    if n == 1:
        return noun
    if many is not None:
        return many
    head, _, tail = noun.partition(" ")  # "file skipped" -> "files skipped"
    word = _plural_word(head)
    return f"{word} {tail}" if tail else word


def count(n: int, noun: str, many: str | None = None, thousands: bool = False) -> str:
    """``n`` and the noun in the form that goes with it: "1 document", "38 documents", "20,000 lines".

    >>> count(1, "document"), count(3, "candidate"), count(20000, "line", thousands=True)
    ('1 document', '3 candidates', '20,000 lines')
    """
    number = f"{n:,}" if thousands else str(n)
    return f"{number} {plural(n, noun, many)}"
