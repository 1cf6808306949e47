"""The order of names, as README "Output" documents it (QA pass of 2026-11-26).

Names compare as Python strings: by code point, a byte of a file name that
is not UTF-8 counting as U+DC80..U+DCFF (surrogateescape). For names that
are valid UTF-8 that is byte order, `LC_ALL=C sort`'s; such a byte sorts
after every character up to U+D7FF and before U+E000 and above, not at its
byte value. The docs table is numbered in this order (the walk, `simdoc
check`), so the output keeps it rather than sort names a second way; it
does not depend on --jobs.
"""

from __future__ import annotations

import os
from itertools import combinations

from conftest import TEXT_A
from hypothesis import given
from hypothesis import strategies as st

# On disk: z, the byte 0x80 (not UTF-8), é (C3 A9), U+E000 (EE 80 80), U+1F600 (F0 9F 98 80).
RAW = [b"z.txt", b"\x80.txt", "é.txt".encode(), "\ue000.txt".encode(), "😀.txt".encode()]
# As documented: é (U+00E9) < the byte 0x80 (U+DC80) < U+E000 < U+1F600; `LC_ALL=C sort` puts 0x80 before é.
DOCUMENTED = ["z.txt", "é.txt", os.fsdecode(b"\x80.txt"), "\ue000.txt", "😀.txt"]


def _corpus(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for raw in RAW:
        with open(os.path.join(os.fsencode(corpus), raw), "w", encoding="utf-8") as fh:
            fh.write(TEXT_A)
    return corpus


def test_pairs_and_clusters_follow_the_documented_order_whatever_the_jobs(run, tmp_path):
    corpus = _corpus(tmp_path)
    outputs = []
    for jobs in ("1", "2"):
        idx = tmp_path / f"idx{jobs}"
        pairs = run("pairs", corpus, "--index", idx, "-j", jobs, "-0")
        assert pairs.exit_code == 0, pairs.stderr
        clusters = run("clusters", "--index", idx, "-0")
        assert clusters.exit_code == 0, clusters.stderr
        outputs.append((pairs.stdout_bytes, clusters.stdout_bytes))
    assert outputs[0] == outputs[1]
    fields = outputs[0][0].split(b"\0")[:-1]
    records = [tuple(fields[i : i + 4]) for i in range(0, len(fields), 4)]
    expected = [(os.fsencode(a), os.fsencode(b), b"1.0000", b"1.0000") for a, b in combinations(DOCUMENTED, 2)]
    assert records == expected
    assert outputs[0][1] == b"\0".join([b"1", b"5", *map(os.fsencode, DOCUMENTED)]) + b"\0"
    assert sorted(RAW) != [os.fsencode(n) for n in DOCUMENTED]  # not byte order for the byte 0x80


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)))))
def test_for_names_that_are_utf8_the_order_is_byte_order(names):
    assert sorted(names) == sorted(names, key=lambda n: n.encode("utf-8"))
