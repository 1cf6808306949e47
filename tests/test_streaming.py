"""Streaming a huge file gives exactly the shingles of reading it whole."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc.corpus.streaming as streaming
from simdoc.corpus.files import read_document
from simdoc.corpus.streaming import stream_document
from simdoc.shingling import ShingleSpec, shingle_texts

WORDS = st.sampled_from(["the", "a", "of", "Bee", "honey", "ÉTÉ", "café", "x", "  ", "\n\t", "\u00a0", "ΣΑΣ"])


@settings(max_examples=120, deadline=None)
@given(
    st.lists(WORDS, max_size=80).map(lambda ws: " ".join(ws)),
    st.sampled_from(["char", "word", "stopword"]),
    st.integers(1, 6),
    st.integers(1, 40),
    st.booleans(),
)
def test_stream_equals_whole(tmp_path_factory, text, unit, k, chunk, lowercase):
    path = tmp_path_factory.mktemp("s") / "doc.txt"
    path.write_text(text, encoding="utf-8")
    spec = ShingleSpec(unit, k, lowercase)
    old = streaming.CHUNK_BYTES
    streaming.CHUNK_BYTES = chunk
    try:
        info, streamed = stream_document(str(path), spec, None, False)
    finally:
        streaming.CHUNK_BYTES = old
    whole = shingle_texts([read_document(str(path)).text], spec)
    assert streamed.data.tolist() == whole.data.tolist()
    assert streamed.counts.tolist() == whole.counts.tolist()
    assert info.digest == read_document(str(path)).digest


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="AΣσςbΑΒ .'1:^é\u0301\u00ad", max_size=60),
    st.integers(1, 12),
    st.sampled_from(["none", "NFC", "NFKC"]),
)
def test_a_capital_sigma_at_a_chunk_boundary_is_lowered_as_in_the_whole_text(text, chunk, unicode):
    """``str.lower`` makes Σ final (ς) or medial (σ) by the cased letters around it, looked for
    across Case_Ignorable characters (. ' : ^ and marks): folding a chunk at a time once gave
    the other form when a chunk ended beside one. Now a chunk is folded up to a place where
    folding apart gives what folding the whole does (any chunk size, any characters)."""
    from simdoc.corpus.streaming import _Normaliser
    from simdoc.shingling import normalise

    norm = _Normaliser(lowercase=True, unicode=unicode)
    pieces = [norm.feed(text[i : i + chunk]) for i in range(0, len(text), chunk)]
    assert "".join(pieces) + norm.feed("", final=True) == normalise(text, True, unicode)


def test_stream_caps_and_reports(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"abc def ghi " * 1000 + b"\xff tail")
    info, sets = stream_document(str(path), ShingleSpec(), None, False)
    assert info.status == "replaced" and "invalid UTF-8 at byte 12000" in info.warning
    info, sets = stream_document(str(path), ShingleSpec(), 100, False)
    assert info.status == "partial" and "--max-bytes 100" in info.warning
    want = shingle_texts([(b"abc def ghi " * 1000)[:100].decode()], ShingleSpec())
    assert np.array_equal(sets.data, want.data)


def test_pipeline_streams_big_files_with_the_same_result(tmp_path, monkeypatch):
    import simdoc

    corpus = tmp_path / "c"
    corpus.mkdir()
    body = "".join(f"line {i % 97} of a long report about bees and honey\n" for i in range(3000))
    (corpus / "big.txt").write_text(body, encoding="utf-8")
    (corpus / "big-copy.txt").write_text(body.replace("line 3 ", "line three "), encoding="utf-8")
    (corpus / "small.txt").write_text("a small unrelated note", encoding="utf-8")
    whole = simdoc.find_pairs(corpus, tmp_path / "i1", threshold=0.5, jobs=1)
    monkeypatch.setattr(streaming, "STREAM_BYTES", 1000)
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 777)
    streamed = simdoc.find_pairs(corpus, tmp_path / "i2", threshold=0.5, jobs=1)
    assert list(whole) == list(streamed) and len(whole) == 1
    a = sorted((tmp_path / "i1").glob("signatures.*.npy"))[0].read_bytes()
    b = sorted((tmp_path / "i2").glob("signatures.*.npy"))[0].read_bytes()
    assert a == b


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab \n\tÉé.", max_size=60), min_size=1, max_size=6),
    unit=st.sampled_from(["char", "word", "stopword"]),
    k=st.integers(1, 4),
    piece=st.integers(1, 17),
)
def test_sets64_of_texts_in_pieces_equal_shingling_whole(texts, unit, k, piece):
    # Verification and `show` shingle long texts in pieces to bound memory: the sets must not change.
    spec = ShingleSpec(unit, k)
    want = shingle_texts(texts, spec, form="sets64")
    old = streaming.PIECE_CHARS
    streaming.PIECE_CHARS = piece
    try:
        got = streaming.sets64_of_texts(texts, spec)
    finally:
        streaming.PIECE_CHARS = old
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.data, want.data) and got.data.dtype == np.uint64
    assert np.array_equal(got.counts, want.counts)


def test_an_invalid_byte_past_the_first_chunk_is_placed_as_in_the_whole_file(tmp_path, monkeypatch):
    """The offset said was the byte's place in its chunk (the decoder's input), not in the file."""
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 7)
    for bom in (b"", b"\xef\xbb\xbf"):
        path = tmp_path / "doc.txt"
        path.write_bytes(bom + "abc déf ".encode() * 10 + b"\xff tail \xc3")
        info, _ = stream_document(str(path), ShingleSpec(), None, False)
        whole = read_document(str(path))
        assert info.warning == whole.warning and "invalid UTF-8 at byte" in whole.warning
