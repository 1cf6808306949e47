"""How a file's bytes become text: UTF-8, or UTF-16 or UTF-32 told by a byte-order mark.

UTF-8 is the rule. A byte that is not valid UTF-8 becomes the lone surrogate
U+DC80..U+DCFF that stands for it (Python's ``surrogateescape``,
:data:`UNDECODABLE`), not U+FFFD: a text in a single-byte encoding
(windows-1251, Latin-1) keeps its letters apart, so two different such texts
differ as their bytes do. (As U+FFFD every letter was one character, and
different windows-1251 texts scored 1.0.)

A text that starts with a UTF-16 or UTF-32 byte-order mark (Windows' "Unicode"
text files) is read in that encoding (:func:`wide_text`); its NUL bytes do not
make it binary, a NUL character among its first characters does.
"""

from __future__ import annotations

import codecs

UNDECODABLE = "surrogateescape"
NOT_UTF8 = "such bytes are compared as they are"  # not "; ": a warning is split there into lines


def not_utf8_lines(lines: list[int]) -> str:
    """The warning of a JSON Lines file whose ``lines`` (numbers, in order) are not all UTF-8."""
    return f"invalid UTF-8 on {len(lines)} line(s), the first line {lines[0]} ({NOT_UTF8})"


def kept_decode(raw: bytes, codec: str = "utf-8") -> tuple[str, int | None]:
    """``raw`` decoded in ``codec``, each byte not valid in it kept as itself (:data:`UNDECODABLE`):
    (text, where the first such byte is, or None when there is none). ``utf-8-sig`` drops a
    leading byte-order mark, as a file's text does; a codec that refuses an ASCII byte too
    (ISO-2022) raises UnicodeDecodeError."""
    try:
        return raw.decode(codec), None
    except UnicodeDecodeError as exc:
        return raw.decode(codec, UNDECODABLE), exc.start


def whole_chars(raw: bytes) -> bytes:
    """``raw`` cut at a byte count, without the bytes of the UTF-8 character the cut splits
    (:func:`incomplete_tail`): a cut text ends on a whole character, never on U+FFFD."""
    return raw[: len(raw) - incomplete_tail(raw)]


def incomplete_tail(raw: bytes) -> int:
    """How many bytes at the end of ``raw`` begin a UTF-8 character they do not finish (0 to 3):
    what a cut at a byte count leaves of the character it splits. As Python's incremental decoder
    holds them back: bytes that begin no valid character are not counted (they are decoded, as
    they would be uncut)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    decoder.decode(raw[-3:], final=False)
    return len(decoder.getstate()[0])


def unicode_bom(raw: bytes) -> str | None:
    """The codec a leading UTF-16 or UTF-32 byte-order mark names (``utf-16``, ``utf-32``), else None."""
    if raw[:4] in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE):  # (FF FE 00 00 starts as UTF-16 LE's does)
        return "utf-32"
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "utf-16"
    return None


def wide_text(raw: bytes, codec: str, cut: bool) -> tuple[str, str | None]:
    """``raw`` read in ``codec`` (UTF-16 or UTF-32 with its byte-order mark, which is no text):
    (its text, a warning or None). A lone surrogate is kept as itself (surrogatepass); a
    character a cut at a byte count (``cut``) splits is left out, as in UTF-8; one the end of
    the file splits is left out and said; a UTF-32 value past U+10FFFF is U+FFFD, and said.
    Read whole or in chunks by one incremental decoder (:func:`wide_decoder`), the same text."""
    decoder = wide_decoder(codec)
    try:
        text = decoder.decode(raw, final=False)
    except UnicodeDecodeError as exc:
        return raw.decode(codec, "replace"), f"invalid {codec.upper()} at byte {exc.start}, replaced by U+FFFD"
    if cut:
        return text, None
    tail, note = wide_end(decoder, codec)
    return text + tail, note


def wide_decoder(codec: str) -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder(codec)("surrogatepass")


def wide_end(decoder: codecs.IncrementalDecoder, codec: str) -> tuple[str, str | None]:
    """What ``decoder`` holds back at the end of a text it was given all of: a lone high
    surrogate (kept), or the bytes of a character the end splits (left out, said)."""
    left = len(decoder.getstate()[0])
    if not left:
        return "", None
    try:
        return decoder.decode(b"", final=True), None
    except UnicodeDecodeError:
        return "", f"{codec.upper()} text ends inside a character: its last {left} byte(s) are left out"
