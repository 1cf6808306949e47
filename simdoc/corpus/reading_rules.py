"""Reading rules: how files are read into texts, recorded with each build, and what an index
made under older rules reads again.

The shingle stage records :data:`READING_RULES` (``reading_rules``; absent: 1). Where a rule
changes the text a file gives, an index made before would keep that file as it read it then
(its stat is unchanged), and an update would print something a rebuild does not:
:func:`read_again_for_rules` names the files to read once more under rules 1;
:func:`simdoc.stages.shingle.read_not_utf8` those under rules 2 (from the docs table).
"""

from __future__ import annotations

import re

import numpy as np

from simdoc.corpus.files import COMPRESSED, compression_of
from simdoc.corpus.names import WARC_SUFFIXES
from simdoc.corpus.read import how_read, name_key

# Rules 2 (2026-11-27): a suffix is told in any case (rules 1 read ``CRAWL.WARC.GZ`` as one plain document,
# or skipped it as binary); and a text cut at a byte count (``--max-bytes``, a WARC body's bound)
# ends at a whole character, as a JSON Lines member's did (rules 1 ended a file's or a WARC
# record's with U+FFFD, and an "invalid UTF-8" warning); a compressed JSON Lines file cut short
# keeps its lines before the cut (rules 1 skipped it whole); a WARC body's leading UTF-8
# byte-order mark is dropped, as a file's is (rules 1 kept it as a character of the text).
# Rules 3 (2026-11-28): a byte that is not valid UTF-8 (or not valid in a WARC body's charset) is kept
# as itself, a lone surrogate U+DC80..U+DCFF (simdoc.corpus.encodings.UNDECODABLE); rules 2 made it U+FFFD,
# and different texts in a single-byte encoding (windows-1251) scored 1.0; and an HTML page that is not
# UTF-8 is read in the charset its <meta> names (simdoc.corpus.html); a text file with a UTF-16 or
# UTF-32 byte-order mark is read so (simdoc.corpus.encodings), not skipped as binary. The shingle stage reads
# again the files an index made before may hold such bytes in (simdoc.stages.shingle.read_not_utf8)
# and those it skipped as binary.
READING_RULES = 3
_CAPITAL_AFTER_DOT = re.compile(r"\.[^/\0]*[A-Z][^/\0]*\0")
_WARC_END = re.compile(  # the end of a name is_warc accepts, in a "\0"-joined list
    "(?:" + "|".join(map(re.escape, WARC_SUFFIXES)) + ")(?:" + "|".join(map(re.escape, COMPRESSED)) + ")?\0", re.IGNORECASE
)


def read_again_for_rules(ids: list[str], sizes: np.ndarray, max_bytes: int | None, skipped: set[str]) -> set[str]:
    """The files an index made under rules 1 (see :data:`READING_RULES`) may have read another way:
    the files it skipped (``skipped``), those :func:`read_by_case` names, and every file whose
    text it may have cut inside a character: every WARC file (a body is cut at ``max_bytes``,
    else at :data:`simdoc.corpus.formats.MEMBER_BYTES`, and may be longer than its file), and
    with ``max_bytes`` a compressed file or one longer than ``max_bytes`` (not JSON Lines and
    Parquet files, whose texts were cut at a whole character already)."""
    joined = "\0".join(ids) + "\0"  # searched, not each name: 10^5 names are a few ms joined
    again = read_by_case(ids, joined) | (skipped & set(ids))
    if max_bytes is None and not _WARC_END.search(joined):
        return again  # (one search: an index of 10^5 files, up to date, asks at every run until one changes)
    again.update(i for i, size in zip(ids, sizes.tolist()) if _maybe_cut(i, how_read(i, size), size, max_bytes))
    return again


def _maybe_cut(path: str, way: str, size: int, max_bytes: int | None) -> bool:
    if way == "warc":  # a body's HTTP Content-Encoding (gzip) may make it longer than its file, any file
        return True
    return max_bytes is not None and way not in ("jsonl", "parquet") and (size > max_bytes or compression_of(path) is not None)


def read_by_case(ids: list[str], joined: str | None = None) -> set[str]:
    """The files whose name tells a format other than plain text only in any case (``A.JSONL``,
    ``b.txt.GZ``). One search of all the names (``joined``: them "\0"-joined, with one at the
    end) first: a corpus seldom has such a name."""
    if not _CAPITAL_AFTER_DOT.search(joined if joined is not None else "\0".join(ids) + "\0"):
        return set()
    return {i for i in ids if (end := name_key(i)) != end.lower() and how_read(i, 0) != "whole"}
