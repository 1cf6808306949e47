"""A long document is signed a piece at a time (item 7 of issue 28): the same bytes as whole.

:func:`simdoc.corpus.streaming.windows_in_pieces` hands the window hashes of a
text over piece by piece and :class:`simdoc.minhash.SignatureFold` folds them;
both schemes must give the signature of shingling the text whole, byte for
byte, for every unit, with the piece size lowered so that random texts cross
many piece boundaries.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus import streaming
from simdoc.minhash import MinHasher, SignatureFold
from simdoc.params import ShingleParams, SignatureParams
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.stages import scan

# Words, stop words, blanks of every kind, capitals and letters that Unicode normalisation joins.
_PARTS = ["a", "b", "The", "of", "AND", "x", " ", "  ", "\n", "\t", "\u00a0", "e\u0301", "\u00c9", "Σ", "ß", "z."]
_texts = st.lists(st.sampled_from(_PARTS), max_size=120).map("".join)


def _whole(text: str | bytes, spec: ShingleSpec, hasher: MinHasher) -> tuple[np.ndarray, int]:
    stream = shingle_texts([text], spec, form="stream")
    return hasher.signatures(stream)[0], int(np.diff(stream.indptr)[0])


def _in_pieces(text: str | bytes, spec: ShingleSpec, hasher: MinHasher) -> tuple[np.ndarray, int]:
    fold = SignatureFold(hasher)
    streaming.windows_in_pieces(text, spec, lambda data, _counts: fold.add(data))
    return fold.result(), fold.n


@settings(max_examples=80, deadline=None)
@given(
    text=_texts,
    unit=st.sampled_from(["char", "word", "stopword"]),
    k=st.integers(1, 5),
    lowercase=st.booleans(),
    unicode=st.sampled_from(["none", "NFC", "NFKC"]),
    scheme=st.sampled_from(["classic", "oph"]),
    num_perm=st.sampled_from([1, 7, 64]),
    piece=st.integers(1, 17),
)
def test_signature_in_pieces_is_the_whole_documents(text, unit, k, lowercase, unicode, scheme, num_perm, piece):
    spec = ShingleSpec(unit, k, lowercase=lowercase, unicode=unicode)
    hasher = MinHasher(num_perm, seed=5, scheme=scheme)
    with mock.patch.object(streaming, "PIECE_CHARS", piece):
        sig, n = _in_pieces(text, spec, hasher)
    want, want_n = _whole(text, spec, hasher)
    assert n == want_n
    assert sig.tobytes() == want.tobytes()


@settings(max_examples=50, deadline=None)
@given(raw=st.binary(max_size=300), scheme=st.sampled_from(["classic", "oph"]), piece=st.integers(1, 40))
def test_ascii_bytes_in_pieces(raw, scheme, piece):
    """ASCII documents given as bytes (the kernel lowercases them itself) sign the same way."""
    text = bytes(b % 128 for b in raw)
    hasher = MinHasher(16, seed=3, scheme=scheme)
    spec = ShingleSpec("char", 3)
    with mock.patch.object(streaming, "PIECE_CHARS", piece):
        sig, n = _in_pieces(text, spec, hasher)
    want, want_n = _whole(text, spec, hasher)
    assert (n, sig.tobytes()) == (want_n, want.tobytes())


def test_oph_fold_densifies_after_the_last_piece():
    """A bin empty in the first piece but hit in a later one keeps its own minimum: folding
    densified signatures would copy another bin's value into it."""
    hasher = MinHasher(64, seed=1, scheme="oph")
    data = np.arange(1, 200, dtype=np.uint32)
    fold = SignatureFold(hasher)
    for part in np.array_split(data, 50):
        fold.add(part)
    whole = hasher.signatures(ShingleSets(np.array([0, len(data)]), data))[0]
    assert fold.result().tobytes() == whole.tobytes()
    assert SignatureFold(hasher).result().tobytes() == b"\xff" * 256  # no shingle: the empty set's row


def test_scan_signs_a_long_document_in_pieces_the_same(tmp_path):
    """The scan task routes a document over LARGE_CHARS through the pieces; its docs rows and
    signatures are those of the batch path, for both schemes and every unit."""
    words = ["the", "Cat", "of", "sat", "AND", "mat", "é", "\n", "  "]
    rng = np.random.default_rng(4)
    files = []
    for i in range(4):
        p = tmp_path / f"d{i}.txt"
        p.write_text(" ".join(rng.choice(words, 100 + 300 * i)), encoding="utf-8")
        files.append((f"d{i}.txt", str(p), p.stat().st_size, None))
    for unit in ("char", "word", "stopword"):
        for scheme in ("classic", "oph"):
            task = scan.ScanTask(files, ShingleParams(unit=unit).resolved(), SignatureParams(32, scheme=scheme).resolved())
            whole = scan.scan_batch(task)
            with mock.patch.object(streaming, "LARGE_CHARS", 1000), mock.patch.object(streaming, "PIECE_CHARS", 37):
                pieces = scan.scan_batch(task)
            with mock.patch.object(streaming, "STREAM_BYTES", 1000), mock.patch.object(streaming, "PIECE_CHARS", 41):
                read_in_chunks = scan.scan_batch(task)
            assert read_in_chunks.docs.hows().count("streamed") >= 2
            for other in (pieces, read_in_chunks):
                assert whole.signatures.tobytes() == other.signatures.tobytes()
                assert whole.docs.n_shingles.tolist() == other.docs.n_shingles.tolist()
            sizes = whole.docs.size.tolist()
            assert min(sizes) < 1000 < max(sizes)  # both paths are taken


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 3 * scan.BATCH_BYTES), max_size=12))
def test_a_large_file_is_a_batch_of_its_own(sizes):
    """Two large files never share a batch (each would be held with the other); batches stay
    consecutive and cover every file once."""
    entries = [mock.Mock(size=s, id=str(i)) for i, s in enumerate(sizes)]
    got = list(scan.batches(entries))
    assert [e.id for b in got for e in b] == [e.id for e in entries]
    for b in got:
        assert len(b) == 1 or all(e.size < scan.BATCH_BYTES for e in b)


def test_scratch_arrays_of_a_long_document_are_not_kept(monkeypatch):
    """Shingling one long text whole must not leave this thread's scratch space at its size."""
    from simdoc import shingling
    from simdoc import workspace as scratch

    monkeypatch.setattr(scratch, "KEEP_BYTES", 1 << 16)
    monkeypatch.setattr(scratch._LOCAL, "workspace", scratch.Workspace(), raising=False)
    text = "".join(chr(97 + (i * 7919) % 26) for i in range(100_000))
    for form in ("sets", "stream", "sets64"):
        small = shingling.shingle_texts([text[:1000]], ShingleSpec("char", 5), form=form)
        big = shingling.shingle_texts([text], ShingleSpec("char", 5), form=form)
        assert scratch.workspace().nbytes() <= 16 * (1 << 16)
        again = shingling.shingle_texts([text], ShingleSpec("char", 5), form=form)
        assert np.array_equal(big.data, again.data) and np.array_equal(big.counts, again.counts)
        assert np.array_equal(small.data, shingling.shingle_texts([text[:1000]], ShingleSpec("char", 5), form=form).data)
