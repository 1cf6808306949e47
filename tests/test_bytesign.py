"""The one-pass kernel from bytes to signatures gives the reference path's signatures, byte for byte."""

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import bytesign, kernels
from simdoc.minhash import MinHasher
from simdoc.shingling import ShingleSpec, normalise, shingle_texts

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")

# Every code point str.split() splits at, and the characters where mapping one code point at a
# time would go wrong: multi-code-point and context-dependent lowercase, combining marks, pairs
# that compose (NFC) or fold (NFKC), Hangul jamo, a BOM, astral characters.
SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]
TRICKY = [
    "İ", "Σ", "ς", "σ", "ẞ", "K", "Å", "Ω", "é", "e\u0301", "\u0301", "\u0327", "\u0345", "ﬁ", "x²", "Ａ", "ǅ",
    "\u1100", "\u1161", "\u11a8", "가", "\u0b47", "\u0b3e", "\u0f73", "\u2000", "\u00a8", "\ufeff", "😀", "𝔄", "\U0001109a",
]
UNSAFE_BYTES = [b"\xff", b"\xc3", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"]

pieces = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=12),
    st.sampled_from(SPACES),
    st.sampled_from(TRICKY),
    st.text(alphabet="aAbB zZ\t\n.,", max_size=12),
    st.sampled_from(["\ud800", "\udfff", "\ufffd"]),  # a JSON string may hold a lone surrogate
)
documents = st.lists(pieces, max_size=12).map("".join)


def reference(texts, spec, hasher):
    """What the scan did before the kernel: shingle_texts' window stream, signed."""
    stream = shingle_texts(texts, spec, form="stream")
    return hasher.signatures(stream), np.diff(stream.indptr)


def documented(texts, spec, hasher):
    """normalise() in Python, then shingle and sign: the documented normalisation (lowercase,
    then Unicode; with NFKC, ``𝔄`` becomes ``A`` and stays a capital, on every path)."""
    decoded = [t.decode("ascii") if isinstance(t, bytes) else t for t in texts]
    stream = shingle_texts([normalise(t, spec.lowercase, spec.unicode) for t in decoded], spec, normalised=True, form="stream")
    return hasher.signatures(stream), np.diff(stream.indptr)


def fast(texts, spec, hasher):
    out = np.zeros((len(texts), hasher.num_perm), np.uint32)
    return out, bytesign.sign_texts(texts, spec, hasher, out)


def assert_same(texts, spec, hasher):
    got_sigs, got_n = fast(texts, spec, hasher)
    for way in (reference, documented):
        want_sigs, want_n = way(texts, spec, hasher)
        assert got_n.tolist() == want_n.tolist()
        assert got_sigs.tobytes() == want_sigs.tobytes()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(documents, max_size=8),
    st.integers(1, 9),
    st.sampled_from([1, 7, 64, 128]),
    st.sampled_from(["oph", "classic"]),
    st.booleans(),
    st.sampled_from(["NFC", "NFKC", "none"]),
)
def test_signatures_and_window_counts_equal_the_reference(texts, k, num_perm, scheme, lowercase, unicode):
    assert_same(texts, ShingleSpec("char", k, lowercase, unicode), MinHasher(num_perm, seed=k, scheme=scheme))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=60), max_size=8), st.integers(1, 7), st.booleans())
def test_ascii_documents_given_as_bytes_equal_the_reference(texts, k, lowercase):
    # An ASCII file arrives as the bytes read_document kept, a whole batch of them as one array.
    spec = ShingleSpec("char", k, lowercase)
    assert_same([t.encode("ascii") for t in texts], spec, MinHasher(32))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(documents, st.text(alphabet=st.characters(max_codepoint=127), max_size=40).map(str.encode)), max_size=8),
    st.sampled_from([1, 16, 100, 128]),
    st.sampled_from(["oph", "classic"]),
    st.booleans(),
)
def test_character_5_shingles_the_default_take_the_kernels_unrolled_way_and_equal_the_reference(texts, num_perm, scheme, lowercase):
    # k = 5 has a loop of its own (five rounds in registers), ASCII bytes a table of their own
    # (premixed blocks and flags, kernels_bytes.ascii_tables); documents shorter than 5 included.
    assert_same(texts, ShingleSpec("char", 5, lowercase), MinHasher(num_perm, seed=3, scheme=scheme))


def test_the_ascii_tables_premix_each_entry_and_flag_whitespace_and_what_the_table_cannot_hold():
    from simdoc import kernels_bytes
    from simdoc.kernels import premix

    table = bytesign.code_point_table(True, "NFKC", True)
    pre, flags = kernels_bytes.ascii_tables(table)
    assert pre.tolist() == [int(premix(np.uint32(m))) for m in table.tolist()]
    assert [c for c in range(128) if flags[c] == 1] == [c for c in range(128) if chr(c).isspace()]
    assert not (flags == 2).any()
    short = kernels_bytes.ascii_tables(table[:65])[1]  # a code point past a table is declined
    assert (short[65:] == 2).all() and (short[:65] != 2).all()


def as_read(raw: bytes):
    """What read_document hands the scan for a file of these bytes: its bytes if ASCII, else
    its text decoded (a BOM dropped, invalid bytes replaced by U+FFFD)."""
    return raw if raw.isascii() else raw.decode("utf-8-sig", "replace")


file_bytes = st.lists(
    st.one_of(st.binary(max_size=8), st.sampled_from(UNSAFE_BYTES), documents.map(lambda t: t.encode("utf-8", "surrogatepass"))),
    max_size=8,
).map(b"".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(file_bytes, max_size=6), st.integers(1, 6), st.sampled_from([16, 100]), st.sampled_from(["oph", "classic"]))
def test_files_with_invalid_utf8_sign_as_the_reference(files, k, num_perm, scheme):
    assert_same([as_read(f) for f in files], ShingleSpec("char", k), MinHasher(num_perm, scheme=scheme))


@settings(max_examples=60, deadline=None)
@given(st.lists(documents, max_size=6), st.integers(1, 5), st.sampled_from(["word", "stopword"]))
def test_word_shingles_go_the_reference_way(texts, k, unit):
    assert_same(texts, ShingleSpec(unit, k), MinHasher(16))


def handled_by_kernel(monkeypatch, texts, spec):
    """The texts the kernel signed itself (the rest went to the reference path)."""
    sent = []
    real = bytesign.shingle_texts

    def spy(batch, *args, **kwargs):
        sent.extend(batch)
        return real(batch, *args, **kwargs)

    monkeypatch.setattr(bytesign, "shingle_texts", spy)
    fast(texts, spec, MinHasher(16))
    return [t for t in texts if t not in sent]


def test_the_kernel_takes_plain_text_and_declines_what_it_cannot_do_exactly(monkeypatch):
    plain = ["Hello  World", b"ASCII bytes\tas read", "café — “quoted” naïve 가", "", "   ", "x\u00a0y\u3000z"]
    declined = ["İstanbul", "ΣΑΣ", "e\u0301", "\u1100\u1161", "emoji 😀", "lone \ud800 surrogate"]
    assert handled_by_kernel(monkeypatch, plain + declined, ShingleSpec("char", 3)) == plain
    assert_same(plain + declined, ShingleSpec("char", 3), MinHasher(16))


@pytest.mark.parametrize("bad", UNSAFE_BYTES)
def test_bytes_that_are_not_strict_utf8_are_declined(bad):
    # Bytes reach the kernel only as ASCII files or encoded str, but the kernel itself must not
    # decode an invalid sequence into a code point (Python would give U+FFFD).
    from simdoc import kernels_bytes

    raw = np.frombuffer(b"ab" + bad + b"cd", np.uint8)
    table = bytesign.code_point_table(True, "NFC")
    handled = np.ones(1, np.bool_)
    one = np.ones(8, np.uint32)
    kernels_bytes.sign_utf8(
        raw, np.array([0, len(raw)], np.int64), 2, table, True, np.uint64(1), np.uint64(2), one, one,
        np.zeros((1, 8), np.uint32), np.zeros(1, np.int64), handled, np.empty(16, np.uint32), np.empty(16, np.uint32),
        np.empty(16, np.uint64), np.empty(8, np.uint64),
    )
    assert not handled[0]


@pytest.mark.parametrize("unicode", ["NFC", "NFKC", "none"])
@pytest.mark.parametrize("lowercase", [True, False])
def test_the_ascii_table_is_the_start_of_the_full_one(lowercase, unicode):
    full = bytesign.code_point_table(lowercase, unicode)
    assert bytesign.code_point_table(lowercase, unicode, True).tolist() == full[:128].tolist()


def test_every_safe_table_entry_is_what_normalise_makes_of_it_between_letters():
    # A mapped code point between two ASCII letters normalises to exactly its entry.
    from simdoc.kernels_bytes import SPACE, UNSAFE

    for unicode in ("NFC", "NFKC"):
        table = bytesign.code_point_table(True, unicode)
        for c in np.flatnonzero(table != UNSAFE).tolist()[::7]:
            got = normalise("a" + chr(c) + "b", True, unicode)
            assert got == ("a b" if table[c] == SPACE else "a" + chr(table[c]) + "b"), hex(c)
        assert table[ord("İ")] == UNSAFE and table[ord("Σ")] == UNSAFE and table[0x301] == UNSAFE
        assert unicodedata.normalize(unicode, "\u1100\u1161") != "\u1100\u1161" and table[0x1161] == UNSAFE


@settings(max_examples=120, deadline=None)
@given(st.lists(st.one_of(documents, file_bytes.map(as_read)), max_size=8), st.integers(1, 9), st.booleans(), st.sampled_from(["NFC", "NFKC", "none"]))
def test_verification_sets_equal_the_reference(texts, k, lowercase, unicode):
    # Verification's 64-bit shingle sets, sorted with counts, from the same one-pass decoding.
    spec = ShingleSpec("char", k, lowercase, unicode)
    want = shingle_texts(texts, spec, form="sets64")
    got = bytesign.sets64_texts(texts, spec)
    assert got.indptr.tolist() == want.indptr.tolist()
    assert np.asarray(got.data).tobytes() == np.asarray(want.data).tobytes()
    assert np.asarray(got.counts).tolist() == np.asarray(want.counts).tolist()
    assert np.asarray(got.data).dtype == np.uint64


@pytest.mark.parametrize("unicode", ["NFC", "NFKC", "none"])
def test_the_compiled_and_the_plain_shingling_agree_on_a_capital_that_nfkc_makes(monkeypatch, unicode):
    """With NFKC, '𝔄' (no lowercase of its own) becomes 'A' after lowercasing: the compiled
    path lowered it once more, so a corpus indexed differently with SIMDOC_NO_NUMBA=1."""
    from simdoc import kernels

    texts = ["𝔄bc Def 𝔄BC", b"ABC def", "\ufb01ne \uff26ine", "ABC def"]
    spec = ShingleSpec("char", 3, unicode=unicode)
    compiled = shingle_texts(texts, spec)
    monkeypatch.setattr(kernels, "ENABLED", False)
    plain = shingle_texts(texts, spec)
    for i in range(len(texts)):
        assert compiled.row(i).tolist() == plain.row(i).tolist(), texts[i]
