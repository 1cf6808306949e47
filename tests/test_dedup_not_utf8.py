"""`simdoc dedup` never lists a file read with bytes that are not UTF-8, nor keeps one for others.

Such bytes are compared as U+FFFD. A text in a single-byte encoding
(windows-1251, KOI8-R, Greek, Hebrew...) loses every letter so, keeping only
its word lengths: three different Russian texts scored 1.0000 against each
other, and `dedup -q` listed two of them for `xargs rm` without a word. Until
such bytes are compared as themselves, a document read so is left out of the
list with a warning (a cluster whose document to keep was read so, whole), as
a document compared by its first --max-bytes only is.
"""

from __future__ import annotations

import random

from conftest import write

LETTERS = "абвгдежзийклмнопрстуфхцчшщъыьэюя"


def _russian(seed: int) -> bytes:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 10))) for _ in range(2000)).encode("cp1251")


def test_texts_in_another_encoding_are_never_listed(run, tmp_path):
    corpus = tmp_path / "c"
    for i in range(3):
        write(corpus / f"t{i}.txt", "")
        (corpus / f"t{i}.txt").write_bytes(_russian(i))
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.8", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # (the three scored 1.0: listed t1.txt and t2.txt)
    assert "1 warning hidden by -q" in r.stderr and "with bytes not UTF-8" in r.stderr
    loud = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.8")
    assert "t0.txt: bytes of it that are not valid UTF-8 were compared as U+FFFD" in loud.stderr
    assert "it is the one to keep: its cluster is left out" in loud.stderr


def test_a_copy_with_a_byte_not_utf8_is_left_out_and_the_others_listed(run, tmp_path):
    corpus = tmp_path / "c"
    text = " ".join(f"word{i % 97} and{i % 13}" for i in range(400))
    write(corpus / "a.txt", text)
    write(corpus / "c.txt", text)
    write(corpus / "b.txt", "")
    (corpus / "b.txt").write_bytes(text.encode() + b" \xff")
    r = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.9")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "c.txt\n"
    assert "b.txt: bytes of it that are not valid UTF-8 were compared as U+FFFD" in r.stderr
    assert "left out, as deleting it could delete a text nothing really compared" in r.stderr
