"""A WARC/WET file cut into spans of records gives exactly what one task reading it gives (issue 29)."""

from __future__ import annotations

import gzip

from hypothesis import given, settings, strategies as st

from simdoc.corpus import warc_spans
from simdoc.corpus.warc import read_warc
from test_warc_crawls import record

BODIES = st.sampled_from([
    "plain words here", "WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 5\r\n\r\nhello",
    "\nWARC/1.0\n\n", "same page text", "caf\u00e9 ol\u00e9",
])
RECORDS = st.tuples(
    st.sampled_from(["http://a/", "http://b/", "http://a/", "http://c/x"]), BODIES,
    st.sampled_from(["response", "resource", "revisit", "conversion"]),
    st.sampled_from([200, 404]),
    st.sampled_from(["text/plain; charset=utf-8", "text/plain; charset=nosuch", "text/plain; charset=ascii", "image/png"]),
)


def _file(tmp_path, recs, gz: bool):
    raw = [record(uri, body, i, kind=kind, status=status, ctype=ctype) for i, (uri, body, kind, status, ctype) in enumerate(recs)]
    path = tmp_path / ("c.warc.gz" if gz else "c.warc")
    path.write_bytes(b"".join(gzip.compress(r) for r in raw) if gz else b"".join(raw))
    return path


@settings(max_examples=60, deadline=None)
@given(recs=st.lists(RECORDS, min_size=1, max_size=12), budget=st.integers(1, 900), gz=st.booleans())
def test_spans_joined_are_one_task(tmp_path_factory, recs, budget, gz):
    tmp = tmp_path_factory.mktemp("w")
    path = _file(tmp, recs, gz)
    old = warc_spans.SPAN_BYTES
    warc_spans.SPAN_BYTES = budget
    try:
        spans = warc_spans.cut(str(path))
    finally:
        warc_spans.SPAN_BYTES = old
    whole = read_warc(str(path), "c.warc")
    if spans is None:  # too small to cut: still one span read and joined
        assert len(recs) == 1 or budget > 200
        spans = [(0, warc_spans._END)]
    got = warc_spans.join([warc_spans.read_span(str(path), s, e) for s, e in spans], "c.warc")
    assert got is not None
    assert got == whole


def test_a_body_holding_a_warc_line_is_never_a_cut_point(tmp_path, monkeypatch):
    monkeypatch.setattr(warc_spans, "SPAN_BYTES", 1)
    body = "x\r\n\r\nWARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 3\r\n\r\nabc\r\n\r\n"
    path = _file(tmp_path, [("http://a/", body, "resource", 200, "text/plain")] * 3, False)
    spans = warc_spans.cut(str(path))
    one = len(record("http://a/", body, 0, kind="resource", ctype="text/plain"))
    assert [s for s, _ in spans] == [0, one, 2 * one]


def test_a_single_gzip_stream_and_a_changed_file_are_one_task(tmp_path, monkeypatch):
    monkeypatch.setattr(warc_spans, "SPAN_BYTES", 1)
    raw = b"".join(record(f"http://{i}/", "text", i) for i in range(3))
    (tmp_path / "s.warc.gz").write_bytes(gzip.compress(raw))
    assert warc_spans.cut(str(tmp_path / "s.warc.gz")) is None
    path = tmp_path / "p.warc"
    path.write_bytes(raw)
    spans = warc_spans.cut(str(path))
    path.write_bytes(b"\r\n" + raw)  # shifted: the spans no longer start where records do
    assert warc_spans.join([warc_spans.read_span(str(path), s, e) for s, e in spans], "p.warc") is None


WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()


def _build(corpus, index, span_bytes, jobs=1, **kw):
    import json
    from unittest import mock

    import simdoc

    with mock.patch.object(warc_spans, "SPAN_BYTES", span_bytes):
        result = simdoc.find_pairs(corpus, index, jobs=jobs, threshold=0.3, **kw)
    manifest = json.loads((index / "manifest.json").read_text())
    arrays = {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}
    warnings = [w for s in result.stages for w in s.warnings]
    return list(result), arrays, manifest["stages"]["shingle"].get("skipped"), warnings


PAGE = st.builds(lambda ws: " ".join(WORDS[i % len(WORDS)] for i in ws), st.lists(st.integers(0, 20), min_size=3, max_size=14))
BUILT = st.tuples(
    st.sampled_from(["http://a/", "http://b/", "http://a/", "http://c/x"]),
    st.one_of(PAGE, BODIES),
    st.sampled_from(["response", "resource", "revisit", "conversion"]),
    st.sampled_from([200, 200, 404]),
    st.sampled_from(["text/plain; charset=utf-8", "text/plain; charset=nosuch", "text/plain; charset=ascii", "image/png"]),
)


@settings(max_examples=12, deadline=None)
@given(recs=st.lists(BUILT, min_size=1, max_size=14), budget=st.integers(1, 700), gz=st.booleans())
def test_a_cut_crawl_gives_the_arrays_pairs_warnings_and_skipped_of_one_task(tmp_path_factory, recs, budget, gz):
    base = tmp_path_factory.mktemp("c")
    (base / "c").mkdir()
    _file(base / "c", recs, gz)
    (base / "c" / "small.txt").write_text("harbour tide table mountain goats climb steep paths\n")
    whole = _build(base / "c", base / "i1", 1 << 40)
    cut = _build(base / "c", base / "i2", budget)
    assert cut == whole


def test_two_workers_on_a_cut_crawl_print_the_exact_jaccards(tmp_path):
    texts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(12)) for i in range(6)] * 2
    (tmp_path / "c").mkdir()
    _file(tmp_path / "c", [(f"http://{i}/", t, "resource", 200, "text/plain") for i, t in enumerate(texts)], False)
    one = _build(tmp_path / "c", tmp_path / "i1", 1 << 40)
    two = _build(tmp_path / "c", tmp_path / "i2", 300, jobs=2)
    assert one[0] == two[0] and one[1] == two[1]
    by_uri = {f"http://{i}/": t for i, t in enumerate(texts)}
    same = [p for p in two[0] if by_uri[p.doc_a.split("/#", 1)[1].split("#")[0]] == by_uri[p.doc_b.split("/#", 1)[1].split("#")[0]]]
    assert len(same) == 6 and all(p.jaccard == 1.0 for p in same)


def test_spans_that_do_not_fit_are_read_again_whole(tmp_path):
    # As if the file changed after it was planned: the second span starts inside a record.
    texts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(12)) for i in range(4)] * 2
    (tmp_path / "c").mkdir()
    _file(tmp_path / "c", [(f"http://{i}/", t, "resource", 200, "text/plain") for i, t in enumerate(texts)], False)
    whole = _build(tmp_path / "c", tmp_path / "i1", 1 << 40)
    from unittest import mock

    with mock.patch.object(warc_spans, "cut", lambda path: [(0, 100), (100, 700), (700, warc_spans._END)]):
        bad = _build(tmp_path / "c", tmp_path / "i2", 1)
    assert bad == whole
