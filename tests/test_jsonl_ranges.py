"""A big plain JSON Lines file is read by byte ranges, one task each (issue 29): the index and the
pairs are byte for byte those of one task reading the whole file, wherever the cuts fall."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdoc
from simdoc.corpus import jsonl_ranges

WORDS = "harbour tide table mountain goats climb steep paths dawn far from any river stone bridge".split()


def index_bytes(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.glob("*.npy"))}


def build(corpus: Path, index: Path, range_bytes: int, **kw):
    with mock.patch.object(jsonl_ranges, "RANGE_BYTES", range_bytes):
        result = simdoc.find_pairs(corpus, index, jobs=1, threshold=0.5, **kw)
    manifest = json.loads((index / "manifest.json").read_text())
    warnings = [w for s in result.stages for w in s.warnings]
    return list(result), index_bytes(index), manifest["stages"]["shingle"].get("skipped"), warnings


def record(draw_words: list[int], extra: int) -> str:
    text = " ".join(WORDS[i % len(WORDS)] for i in draw_words) + " x" * extra
    return json.dumps({"text": text})


line = st.one_of(
    st.builds(record, st.lists(st.integers(0, 30), min_size=0, max_size=12), st.integers(0, 60)),  # some longer than a cut
    st.just(""),  # an empty line
    st.just("   "),
    st.just("not json"),
    st.just('{"title": "no text"}'),
    st.just(json.dumps({"text": "harbour tide table mountain goats climb steep paths"})),  # repeats: pairs
    st.just(json.dumps({"text": "caf\u00e9 na\u00efve \u00fcber"}, ensure_ascii=False)),
    # ids that repeat (across ranges too), that look like line numbers or renamed repeats, with a NUL byte
    st.builds(
        lambda k, i: json.dumps({"id": k, "text": f"harbour tide table mountain goats {i}"}),
        st.sampled_from(["k", "k@3", "k@3@3", "1", "3", 2, "a\u0000b", None]), st.integers(0, 3),
    ),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    lines=st.lists(line, min_size=0, max_size=25),
    crlf=st.booleans(),
    last_newline=st.booleans(),
    cut_at=st.integers(1, 200),
    min_length=st.sampled_from([None, 12]),
    max_bytes=st.sampled_from([None, 50]),
    id_field=st.sampled_from([None, "id"]),
)
def test_any_cut_gives_the_arrays_and_pairs_of_one_task(
    tmp_path_factory, lines, crlf, last_newline, cut_at, min_length, max_bytes, id_field
):
    base = tmp_path_factory.mktemp("ranges")
    nl = "\r\n" if crlf else "\n"
    body = nl.join(lines) + (nl if last_newline and lines else "")
    (base / "c").mkdir()
    (base / "c" / "big.jsonl").write_bytes(body.encode("utf-8"))
    (base / "c" / "small.txt").write_text("harbour tide table mountain goats climb steep paths\n")
    kw = {"min_length": min_length, "max_bytes": max_bytes, "id_field": id_field}
    whole = build(base / "c", base / "i1", 1 << 40, **kw)
    cut = build(base / "c", base / "i2", cut_at, **kw)
    assert cut == whole


def test_a_binary_file_and_invalid_utf8_and_a_bom_are_told_as_by_one_task(tmp_path):
    rows = [json.dumps({"text": f"line {i} harbour tide table mountain goats"}).encode() for i in range(40)]
    rows[7] = b'{"text": "bad \xff byte harbour tide"}'
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + b"\n".join(rows) + b"\n")
    (tmp_path / "c" / "b.jsonl").write_bytes(b"\x00" + b"\n".join(rows))
    whole = build(tmp_path / "c", tmp_path / "i1", 1 << 40)
    with mock.patch("simdoc.corpus.read.read_range", wraps=jsonl_ranges.read_range) as ranges:
        cut = build(tmp_path / "c", tmp_path / "i2", 64)
    assert ranges.call_count > 20  # read by ranges indeed
    assert cut == whole
    assert "invalid UTF-8" in json.dumps(whole[3]) and "binary" in json.dumps(whole[2])


def test_an_update_by_ranges_is_the_update_by_one_task(tmp_path):
    rows = [json.dumps({"text": f"record {i} harbour tide table mountain goats climb"}) for i in range(60)]
    (tmp_path / "c").mkdir()
    f = tmp_path / "c" / "a.jsonl"
    f.write_text("\n".join(rows) + "\n")
    assert build(tmp_path / "c", tmp_path / "i1", 100) == build(tmp_path / "c", tmp_path / "i2", 1 << 40)
    rows[30] = json.dumps({"text": "record 3 harbour tide table mountain goats climb"})  # an edit
    f.write_text("\n".join(rows) + "\n")
    assert build(tmp_path / "c", tmp_path / "i1", 100) == build(tmp_path / "c", tmp_path / "i2", 1 << 40)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched: the same bytes
    assert build(tmp_path / "c", tmp_path / "i1", 100) == build(tmp_path / "c", tmp_path / "i2", 1 << 40)


def test_ids_that_repeat_across_ranges_are_renamed_as_by_one_task(tmp_path):
    rows = [json.dumps({"id": f"k{i % 7}", "text": f"record {i} harbour tide table mountain goats climb"}) for i in range(50)]
    rows[20] = json.dumps({"text": "no id here, harbour tide table mountain goats climb"})
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_text("\n".join(rows) + "\n")
    whole = build(tmp_path / "c", tmp_path / "i1", 1 << 40, id_field="id")
    cut = build(tmp_path / "c", tmp_path / "i2", 150, id_field="id")
    assert cut == whole
    assert any("@LINE" in w for w in whole[3]) and any("no field 'id'" in w for w in whole[3])


def test_line_ids_of_every_width_are_ordered_as_by_one_task(tmp_path):
    """Ids SOURCE/#1 .. #1100 sort as strings (#10 before #2): the join renumbers and orders them as
    arrays, and the docs table and signatures are one task's, byte for byte, wherever the cuts fall."""
    rows = [json.dumps({"text": f"record {i} {WORDS[i % 13]} {WORDS[i % 7]} harbour tide table"}) for i in range(1100)]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_text("\n".join(rows) + "\n")
    whole = build(tmp_path / "c", tmp_path / "w", 1 << 40)
    for n, cut_at in enumerate((97, 4000, 30011)):
        assert build(tmp_path / "c", tmp_path / f"i{n}", cut_at) == whole
