"""The rules for names: which files hold many documents (JSON Lines, WARC, Parquet), member ids,
and the key a walk sorts a file's id by (:func:`walk_key`).

:mod:`simdoc.corpus.walk` finds the files; its names are re-exported there.
"""

from __future__ import annotations

import re

from simdoc.corpus.files import COMPRESSED, uncompressed_name

JSONL_SUFFIXES = (".jsonl", ".ndjson")
WARC_SUFFIXES = (".warc", ".wet")  # .warc.wet is Common Crawl's plain text (WET)
MEMBER_SEPARATOR = "/#"  # between a file's id and the key of a document inside it


def is_jsonl(path: str) -> bool:
    """A JSON Lines file by its name (``.jsonl``, ``.ndjson``, in any case, possibly compressed)."""
    return uncompressed_name(path).endswith(JSONL_SUFFIXES)


def is_warc(path: str) -> bool:
    """A WARC or WET file by its name (``.warc``, ``.wet``, ``.warc.wet``, in any case, possibly compressed)."""
    return uncompressed_name(path).endswith(WARC_SUFFIXES)


def walk_key(doc_id: str) -> str:
    """What a file's id sorts by: a file of many documents sorts as its members' ids do.

    A member's id is ``PATH/#KEY`` (see :mod:`simdoc.corpus.formats`). Since PATH is
    a file, no other file's id starts with ``PATH/``: member ids never equal
    another document's id. Sorting such a file as ``PATH/``, the way a
    directory sorts, keeps the ids of all documents in sorted order.
    """
    dot = doc_id.rfind(".")
    if dot < 0 or doc_id[dot:].lower() not in _MANY_SUFFIXES:
        return doc_id  # most files: one look at the last suffix (a walk asks for 10^5 of them)
    return doc_id + "/" if is_jsonl(doc_id) or is_warc(doc_id) or doc_id.lower().endswith(".parquet") else doc_id


# The last suffix (lowercased) of every name is_jsonl, is_warc or is_parquet accepts (each suffix has one dot).
_MANY_SUFFIXES = frozenset((*COMPRESSED, *JSONL_SUFFIXES, *WARC_SUFFIXES, ".parquet"))
# Any of them (lowercased, as a name is) at the end of a name of a "\0"-joined list: one search of a
# folder's names, not one a suffix (Python's own sources: 9,187 folders, ~8 us each).
_MANY_SUFFIX_END = re.compile("|".join(re.escape(suffix + "\0") for suffix in sorted(_MANY_SUFFIXES)))


def walk_keys(names: list[str]) -> list[str]:
    """:func:`walk_key` of each name: the names themselves unless one ends (in any case) with a
    suffix of a file of many documents, found in one search of them all."""
    if _MANY_SUFFIX_END.search("\0".join(names).lower() + "\0"):
        return list(map(walk_key, names))
    return names
