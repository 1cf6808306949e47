"""Document ids are unique by construction: members of JSON Lines and WARC files, and plain files."""

from __future__ import annotations

import json
import os
import re

from conftest import TEXT_A, TEXT_C, records, write
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc.corpus.formats import split_jsonl

OTHER = "Mountain goats climb steep paths at dawn, far from any harbour or tide table.\n"


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_a_renamed_repeat_never_overwrites_another_line():
    rows = [{"id": "k@3", "text": TEXT_A}, {"id": "k", "text": OTHER}, {"id": "k", "text": TEXT_C}]
    docs, warnings = split_jsonl(jsonl(rows), "f.jsonl", id_field="id")
    assert sorted(text for _, text, *_ in docs) == sorted(r["text"] for r in rows)  # none lost
    assert len({doc_id for doc_id, *_ in docs}) == 3
    assert any("line 3" in w and "'k'" in w for w in warnings), warnings


def test_a_repeat_whose_new_name_is_another_lines_id_is_renamed_again_and_named():
    rows = [{"id": "k", "text": "1"}, {"id": "k", "text": "2"}, {"id": "k@2", "text": "3"}]
    docs, warnings = split_jsonl(jsonl(rows), "f.jsonl", id_field="id")
    assert len({d for d, *_ in docs}) == 3 and sorted(t for _, t, *_ in docs) == ["1", "2", "3"]
    # Line 2 repeats k; line 3's k@2 is line 2's new name: one warning for the kind, naming both.
    assert warnings == ["2 lines (2, 3): an id that repeats gets @LINE appended"], warnings


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["k", "k@2", "k@3", "k@3@3", "1", "2", "3", "@", ""]), st.none()), max_size=12))
def test_member_ids_are_unique_and_no_line_is_lost(keys):
    rows = [({"id": k} if k is not None else {}) | {"text": f"t{i}"} for i, k in enumerate(keys)]
    docs, warnings = split_jsonl(jsonl(rows), "f.jsonl", id_field="id")
    ids = [d for d, *_ in docs]
    assert len(set(ids)) == len(ids) == len(rows)
    assert ids == sorted(ids)
    assert sorted(t for _, t, *_ in docs) == sorted(r["text"] for r in rows)
    # Every id that is not the line's own key (or its line number) is named in a warning.
    renamed = len(rows) - len({d for d in ids} & {f"f.jsonl/#{r.get('id', i + 1)}" for i, r in enumerate(rows)})
    assert lines_named(warnings) >= renamed


def lines_named(warnings: list[str]) -> int:
    """How many lines the warnings speak of: one, or N for a warning that many lines share."""
    return sum(int(m[1].replace(",", "")) if (m := re.match(r"([\d,]+) lines \(", w)) else 1 for w in warnings)


def test_an_id_with_a_nul_byte_is_replaced_by_the_line_number():
    docs, warnings = split_jsonl(jsonl([{"id": "a\u0000b", "text": "x"}]), "f.jsonl", id_field="id")
    assert [d for d, *_ in docs] == ["f.jsonl/#1"] and "NUL" in warnings[0]


def test_an_id_with_a_lone_surrogate_is_replaced_by_the_line_number(run, tmp_path):
    # JSON's "\ud800" is half of a pair, no character: it has no UTF-8 form. The whole run
    # stopped with a UnicodeEncodeError; now the line keeps its document under its number.
    # "\udcff" is the byte FF, as a line's byte that is not UTF-8 is read (simdoc.corpus.encodings):
    # a name holds it as a file name does, printed \xff.
    rows = [{"id": "x\ud800y", "text": TEXT_A}, {"id": "ok", "text": TEXT_A}, {"id": "\udcff", "text": TEXT_A}]
    docs, warnings = split_jsonl(jsonl(rows), "f.jsonl", id_field="id")
    assert [d for d, *_ in docs] == ["f.jsonl/#1", "f.jsonl/#ok", "f.jsonl/#\udcff"]
    assert warnings == ["line 1: its id has a lone surrogate (no character); its id is the line number"], warnings
    write(tmp_path / "c" / "f.jsonl", jsonl(rows))
    r = run("pairs", tmp_path / "c", "--index", tmp_path / "idx", "--id-field", "id", "-t", "0.9")
    assert r.exit_code == 0, r.stderr
    assert records(r) == [["f.jsonl/#1", "f.jsonl/#ok", "1.0000", "1.0000"], ["f.jsonl/#1", "f.jsonl/#\\xff", "1.0000", "1.0000"],
                          ["f.jsonl/#ok", "f.jsonl/#\\xff", "1.0000", "1.0000"]]


def test_a_plain_file_named_like_a_member_keeps_its_own_id(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "a.jsonl", jsonl([{"text": TEXT_A}, {"text": OTHER}]))
    write(corpus / "a.jsonl#1", TEXT_A)
    write(corpus / "a.jsonl copy", TEXT_A)  # sorts before the members' "a.jsonl/"
    write(corpus / "a.jsonl0", TEXT_A)  # sorts after them
    idx = tmp_path / "idx"
    r = run("pairs", corpus, "--index", idx, "-j", "1")
    assert r.exit_code == 0, r.stderr
    pairs = records(r)
    ids = {p[0] for p in pairs} | {p[1] for p in pairs}
    assert ids == {"a.jsonl/#1", "a.jsonl#1", "a.jsonl copy", "a.jsonl0"}
    assert all(p[0] < p[1] for p in pairs) and len(pairs) == 6
    assert run("check", "--index", idx).exit_code == 0
    # show opens the file a plain id names, not the member, and the other way round.
    shown = run("show", corpus, "--index", idx, "a.jsonl#1", "a.jsonl/#2", "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["set_jaccard"] < 0.5 and "no passages" not in shown.stderr
    # dedup --absolute never prints a path that names another file.
    d = run("dedup", corpus, "--index", idx, "--absolute", "-0")
    assert d.exit_code == 0, d.stderr
    dropped = [p for p in d.stdout_bytes.split(b"\0") if p]
    for path in dropped:
        name = os.fsdecode(path)
        assert not os.path.exists(name) or os.path.isfile(name) and "/#" not in name
    assert os.fsencode(str(corpus / "a.jsonl#1")) in dropped or os.fsencode(str(corpus / "a.jsonl copy")) in dropped


def test_members_of_different_files_never_collide(run, tmp_path):
    corpus = tmp_path / "c"
    write(corpus / "x.jsonl", jsonl([{"id": "y.jsonl#k", "text": TEXT_A}]))
    write(corpus / "x.jsonl#y.jsonl", jsonl([{"id": "k", "text": TEXT_A}]))
    r = run("pairs", corpus, "--index", tmp_path / "idx", "--id-field", "id")
    assert r.exit_code == 0, r.stderr
    assert records(r) == [["x.jsonl#y.jsonl/#k", "x.jsonl/#y.jsonl#k", "1.0000", "1.0000"]]


def test_an_index_with_members_named_the_old_way_is_rebuilt_not_updated(tmp_path):
    import simdoc
    from simdoc.corpus.formats import MEMBER_IDS
    from simdoc.store.manifest import dump

    corpus = tmp_path / "c"
    write(corpus / "a.jsonl", jsonl([{"text": TEXT_A}, {"text": TEXT_A}]))
    idx = tmp_path / "idx"
    simdoc.find_pairs(corpus, idx)
    manifest = json.loads((idx / "manifest.json").read_text())
    del manifest["stages"]["shingle"]["params"]["member_ids"]  # as simdoc wrote it before
    (idx / "manifest.json").write_bytes(dump(manifest))
    res = simdoc.find_pairs(corpus, idx)
    assert res.stages[0].built and "read 1 file," not in res.stages[0].detail
    assert json.loads((idx / "manifest.json").read_text())["stages"]["shingle"]["params"]["member_ids"] == MEMBER_IDS
    assert [(p.doc_a, p.doc_b) for p in res] == [("a.jsonl/#1", "a.jsonl/#2")]
