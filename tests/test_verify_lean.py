"""Verification's lean path (issue 32): plain files read again in the fewest system calls, the docs
table's places gathered a batch at a time, the texts shingled straight into the rows held, the pairs
merged where their rows lie. Each gives what the general way gives."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdoc
import simdoc.corpus.plain
import simdoc.stages.verify as verify
from simdoc import jit, kernels, kernels_read
from simdoc.bytesign import sets64_into, sets64_spans, sets64_texts
from simdoc.corpus.files import read_document, read_plain
from simdoc.corpus.encodings import unicode_bom
from simdoc.corpus.plain import WIDE, read_again_into, text_at
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, shingle_texts
from simdoc.similarity import pair_sums, span_sums
from simdoc.stages.reread import reader_of
from simdoc.store.docnames import Names
from simdoc.store.doctable import DocsTable, Strings, _blob
from simdoc.store.loaded import open_index

KINDS = {
    "ascii.txt": b"plain words, plain words\nand more",
    "utf16.txt": "\ufeffcaf\u00e9 au lait".encode("utf-16-le"),  # (as_scanned: WIDE, read the general way)
    "bom.txt": "\ufeffcaf\u00e9 au lait".encode(),
    "bad.txt": b"caf\xe9 not utf-8 \xff",
    "wide.txt": "\u00c9t\u00e9 \U0001f600 \u0130stanbul".encode(),
    "empty.txt": b"",
}


def as_scanned(path: str | None, digest: bytes, follow: bool = False, size: int = -1) -> str | bytes | int | None:
    """The text the shingle stage reads from ``path`` (:func:`read_plain`) if its digest is
    ``digest`` (the file is the one indexed); else None: what the batch reader must give. WIDE
    for a regular file of ``size`` bytes that starts with a UTF-16 or UTF-32 mark, as indexed
    or not (the caller reads it the general way)."""
    if path is None:
        return None
    p = Path(path)
    if (follow or not p.is_symlink()) and p.is_file() and p.stat().st_size == size and unicode_bom(p.read_bytes()[:4]):
        return WIDE
    text, got, _, _ = read_plain(path, None, follow)
    return text if text is not None and got == digest else None


def _into(paths, sizes, digests, follow=False) -> list:
    """read_again_into's texts as the scan's reader gives them: ASCII bytes as they are, any
    other decoded (a byte not UTF-8 kept as itself; the byte-order mark is not in the span)."""
    buf, starts, ends = read_again_into(paths, sizes, np.frombuffer(digests, np.uint8).reshape(-1, 16), follow)
    return [WIDE if s == WIDE else None if s < 0 else text_at(buf, s, e) for s, e in zip(starts.tolist(), ends.tolist())]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_plain_file_reads_as_read_document_reads_it(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(KINDS[name])
    res = read_document(str(path), keep_ascii=True)
    got = _into([str(path)], [len(KINDS[name])], bytes.fromhex(res.digest))[0]
    if name == "utf16.txt":  # not UTF-8: left to the general way, which reads its text
        assert got == WIDE and res.text == "caf\u00e9 au lait"
        return
    assert got == res.text and type(got) is type(res.text)


def test_a_plain_file_not_the_one_indexed_is_not_read(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"the indexed text")
    digest = bytes.fromhex(read_document(str(path)).digest)
    size = path.stat().st_size

    def again(p, follow=False):
        return _into([str(p)], [size], digest, follow)[0]

    assert again(path) == b"the indexed text"
    path.write_bytes(b"the edited  text")  # in place, the same size
    assert again(path) is None
    path.write_bytes(b"the indexed text, grown")
    assert again(path) is None
    path.write_bytes(b"the indexed text")
    (tmp_path / "link.txt").symlink_to(path)
    assert again(tmp_path / "link.txt") is None  # a link is not followed
    assert again(tmp_path / "link.txt", follow=True) == b"the indexed text"
    os.mkfifo(tmp_path / "fifo")  # never blocks: not a regular file
    assert again(tmp_path / "fifo") is None
    assert again(tmp_path / "gone.txt") is None
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"a\x00b")
    assert _into([str(nul)], [3], bytes.fromhex(read_document(str(nul)).digest))[0] is None  # binary


def test_files_read_into_one_buffer_are_the_texts_the_scan_reads(tmp_path):
    """Every kind of file, and every way of not being the one indexed, in one batch: the texts
    the scan's reader gives where the digest is the one indexed (a byte-order mark left out,
    invalid bytes replaced once decoded), and None where it is not."""
    paths, sizes, digests = [], [], []
    for name, raw in sorted(KINDS.items()):
        (tmp_path / name).write_bytes(raw)
        paths.append(str(tmp_path / name))
        sizes.append(len(raw))
        digests.append(bytes.fromhex(read_document(str(tmp_path / name), keep_ascii=True).digest))
    good = tmp_path / "good.txt"
    good.write_bytes(b"the indexed text")
    size, digest = good.stat().st_size, bytes.fromhex(read_document(str(good)).digest)
    (tmp_path / "edited.txt").write_bytes(b"the edited  text")
    (tmp_path / "grown.txt").write_bytes(b"the indexed text, grown")
    (tmp_path / "link.txt").symlink_to(good)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "nul.txt").write_bytes(b"a\x00b")
    for name in ("good.txt", "edited.txt", "grown.txt", "link.txt", "fifo", "gone.txt"):
        paths.append(str(tmp_path / name))
        sizes.append(size)
        digests.append(digest)
    paths += [str(tmp_path / "nul.txt"), None]
    sizes += [3, size]
    digests += [bytes.fromhex(read_document(str(tmp_path / "nul.txt")).digest), digest]
    want = [as_scanned(p, d, False, s) for p, d, s in zip(paths, digests, sizes)]
    assert want.count(None) == 7 and want.count(WIDE) == 1
    got = _into(paths, sizes, b"".join(digests))
    assert got == want and [type(g) for g in got] == [type(w) for w in want]
    follow = [as_scanned(p, d, True, s) for p, d, s in zip(paths, digests, sizes)]
    assert _into(paths, sizes, b"".join(digests), follow=True) == follow and follow.count(None) == 6


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(KINDS) + ["edited", "grown", "link", "gone", "nul"]), st.binary(max_size=30)), min_size=1, max_size=8),
       st.booleans())
def test_a_batch_reads_what_the_scan_reads(tmp_path_factory, files, follow):
    """Any batch of files (each indexed with some bytes, then left, edited, grown, replaced by a
    link, removed or made binary): read_again_into gives the scan reader's text where the file
    still has the digest indexed, None elsewhere, each file whatever the others in the batch."""
    root = tmp_path_factory.mktemp("batch")
    paths, sizes, digests = [], [], []
    for i, (kind, raw) in enumerate(files):
        path = root / f"{i}.txt"
        raw = KINDS.get(kind, raw)
        path.write_bytes(raw)
        digest = read_plain(str(path))[1]
        if kind == "edited" and raw:
            path.write_bytes(bytes([raw[0] ^ 1]) + raw[1:])
        elif kind == "grown":
            path.write_bytes(raw + b"!")
        elif kind == "link":
            (root / f"{i}.target").write_bytes(raw)
            path.unlink()
            path.symlink_to(root / f"{i}.target")
        elif kind == "gone":
            path.unlink()
        elif kind == "nul":
            raw = raw[:4] + b"\x00" + raw[4:]
            path.write_bytes(raw)
            digest = read_plain(str(path))[1] or digest
        paths.append(str(path))
        sizes.append(len(raw))
        digests.append(digest)
    want = [as_scanned(p, d, follow, s) for p, d, s in zip(paths, digests, sizes)]
    for compiled in (True, False):  # the batch read in one compiled loop, and each file on its own
        with pytest.MonkeyPatch.context() as m:
            m.setattr(simdoc.corpus.plain, "_compiled", lambda compiled=compiled: compiled and kernels_read.AVAILABLE)
            got = _into(paths, sizes, b"".join(digests), follow)
        assert got == want and [type(g) for g in got] == [type(w) for w in want]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")), min_size=1, max_size=6),
       st.sampled_from([ShingleSpec("char", 1), ShingleSpec("char", 3), ShingleSpec("char", 5, lowercase=False, unicode="NFKC")]))
def test_texts_shingled_where_they_were_read_are_the_decoded_texts_sets(raws, spec):
    """sets64_spans of texts in a buffer (a byte apart, bytes that are not UTF-8 too) gives
    sets64_into's rows of the texts decoded; what it declines, it declines."""
    texts = [r if r.isascii() else r.decode("utf-8", "surrogateescape") for r in raws]
    starts = np.cumsum([0] + [len(r) + 1 for r in raws[:-1]]).astype(np.int64)
    buf = bytearray(b"\xff".join(raws))
    room = sum(map(len, raws)) + sum(4 * len(t) for t in texts)
    d1, c1, d2, c2 = np.zeros(room, np.uint64), np.zeros(room, np.uint32), np.zeros(room, np.uint64), np.zeros(room, np.uint32)
    got = sets64_spans(buf, starts, starts + np.array([len(r) for r in raws], np.int64), spec, d1, c1)
    want = sets64_into(texts, spec, d2, c2)
    ref = shingle_texts(texts, spec, form="sets64")
    at = 0
    for i, m in enumerate(got.tolist()):
        if m >= 0:  # declined only where the bytes are not strict UTF-8 or the text is declined
            assert np.array_equal(d1[at : at + m], ref.row(i)) and np.array_equal(c1[at : at + m], ref.row_counts(i))
            assert want[i] == m
            at += m
        else:
            assert want[i] < 0 or raws[i] != texts[i].encode("utf-8", "surrogatepass")


NAMES = st.lists(st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1, max_size=8), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(NAMES, st.data())
def test_places_are_the_rows_sources_or_ids(names, data):
    sources = [data.draw(st.sampled_from(["", "f.jsonl", "d/\u00e9.warc"])) for _ in names]
    names = [s + "/#" + k if s else k for s, k in zip(sources, names)]  # a member's id is SOURCE/#KEY
    ids = Strings(*_blob(names))
    table = DocsTable(Names.of(names, sources))
    docs = np.asarray(data.draw(st.lists(st.integers(0, len(names) - 1), max_size=20)), np.int64)
    want = [sources[d] or names[d] for d in docs.tolist()]
    assert table.places(docs) == want
    assert ids.take(docs) == table.ids.take(docs) == [names[d] for d in docs.tolist()]


ROWS = st.lists(st.dictionaries(st.integers(0, 2**64 - 1), st.integers(1, 5), max_size=30), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(ROWS, st.data(), st.booleans())
def test_span_sums_are_pair_sums_of_the_rows_wherever_they_lie(rows, data, compiled):
    sets = ShingleSets(
        np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64),
        np.array([v for r in rows for v in sorted(r)], np.uint64),
        np.array([r[v] for r in rows for v in sorted(r)], np.uint32),
    )
    # The rows in an arena, in another order, with gaps between them.
    order = data.draw(st.permutations(range(len(rows))))
    arena_d, arena_c, spans, at = np.zeros(400, np.uint64), np.zeros(400, np.uint32), {}, 0
    for r in order:
        at += data.draw(st.integers(0, 3))
        a, b = sets.indptr[r], sets.indptr[r + 1]
        arena_d[at : at + b - a], arena_c[at : at + b - a] = sets.data[a:b], sets.counts[a:b]
        spans[r] = (at, at + b - a)
        at += b - a
    pairs = data.draw(st.lists(st.tuples(st.sampled_from(range(len(rows))), st.sampled_from(range(len(rows)))), max_size=10))
    left = np.array([p[0] for p in pairs], np.int64)
    right = np.array([p[1] for p in pairs], np.int64)
    sa = np.array([spans[a] for a in left.tolist()], np.int64).reshape(-1, 2)
    sb = np.array([spans[b] for b in right.tolist()], np.int64).reshape(-1, 2)
    enabled = jit.ENABLED
    try:
        jit.ENABLED = enabled and compiled  # the reference loop too (jit's switch: kernels' is a copy)
        got = span_sums(arena_d, arena_c, sa, sb)
    finally:
        jit.ENABLED = enabled
    assert np.array_equal(got, pair_sums(sets, left, right))


def test_sets64_into_writes_the_rows_of_sets64_texts_and_declines_the_rest():
    spec = ShingleSpec("char", 3)
    texts = [b"abcabcabc", "caf\u00e9 \u00e9t\u00e9", "\U0001f600 smile", b"", "\u0130stanbul", b"ab"]
    data, counts = np.zeros(200, np.uint64), np.zeros(200, np.uint32)
    sizes = sets64_into(texts, spec, data, counts)
    ref = shingle_texts(texts, spec, form="sets64")
    at = 0
    for i, m in enumerate(sizes.tolist()):
        if m < 0:
            assert kernels.ENABLED is False or texts[i] in ("\U0001f600 smile", "\u0130stanbul")
            continue
        assert np.array_equal(data[at : at + m], ref.row(i)) and np.array_equal(counts[at : at + m], ref.row_counts(i))
        at += m
    whole = sets64_texts(texts, spec)
    assert np.array_equal(whole.indptr, ref.indptr) and np.array_equal(whole.data, ref.data)
    assert np.array_equal(sets64_into(texts, ShingleSpec("word", 2), data, counts), np.full(len(texts), -1))


def _corpus(root, n: int = 14) -> None:
    root.mkdir()
    base = " ".join(f"word{i % 23} filler{i % 7}" for i in range(400))
    for i in range(n):
        (root / f"d{i:02d}.txt").write_text(base + f" tail {i} " * (i % 4), encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "\u00e9.txt").write_text("\u00c9t\u00e9 " + base, encoding="utf-8")
    (root / "m.jsonl").write_text("".join(f'{{"id": {i}, "text": "{base} member {i}"}}\n' for i in range(3)), encoding="utf-8")


def test_a_tiny_arena_and_budget_give_the_same_jaccards_and_an_edit_in_place_is_stale(tmp_path, monkeypatch):
    """The rows held grow, move to the front and are dropped many times: the same floats as the
    default run; then a file edited in place (same size) between indexing and verification is
    stale and its pairs left out, the others still compared."""
    _corpus(tmp_path / "c")
    simdoc.find_pairs(tmp_path / "c", tmp_path / "idx", jobs=1, verify=False)
    loaded = open_index(tmp_path / "idx")
    n = len(loaded.docs())
    left = np.array([a for a in range(n) for b in range(a + 1, n)], np.int64)
    right = np.array([b for a in range(n) for b in range(a + 1, n)], np.int64)
    whole = verify.verify_pairs(reader_of(loaded), left, right, jobs=1)
    assert whole.ok.all() and whole.set_jaccard.min() > 0
    monkeypatch.setattr(verify, "ARENA_VALUES", 1)
    monkeypatch.setattr(verify, "CHUNK_BYTES", 1)
    reader = reader_of(loaded)
    small = verify.verify_pairs(reader, left, right, jobs=1, budget=30_000)
    assert np.array_equal(small.set_jaccard, whole.set_jaccard) and np.array_equal(small.bag_jaccard, whole.bag_jaccard)
    assert max(reader.reads.values()) > 1  # the budget made it read some again
    edited = tmp_path / "c" / "d03.txt"
    text = edited.read_bytes()
    edited.write_bytes(text.replace(b"word1 ", b"WORD1 ", 1))
    got = verify.verify_pairs(reader_of(loaded), left, right, jobs=1)
    d = loaded.docs().ids.index("d03.txt")
    assert got.stale == {d} and not got.gone
    assert not got.ok[(left == d) | (right == d)].any() and got.ok[(left != d) & (right != d)].all()
    assert np.array_equal(got.set_jaccard[got.ok], whole.set_jaccard[got.ok])
    (tmp_path / "c" / "d05.txt").unlink()  # vanished: gone, not stale
    gone = loaded.docs().ids.index("d05.txt")
    got = verify.verify_pairs(reader_of(loaded), left, right, jobs=2)
    assert got.stale == {d} and got.gone == {gone}
    kept = (left != d) & (right != d) & (left != gone) & (right != gone)
    assert got.ok[kept].all() and not got.ok[~kept].any()
    assert np.array_equal(got.set_jaccard[kept], whole.set_jaccard[kept])
