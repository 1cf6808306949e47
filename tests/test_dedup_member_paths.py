"""`dedup --absolute` lists a member's id under the corpus verbatim, whatever its key holds.

A member's id is ``SOURCE/#KEY`` and the key may hold anything but a NUL: a
WARC record's URI (``http://a.example/x``), an ``--id-field`` value. The
absolute list joined the id's parts with os.path.join, which drops an empty
part: ``crawl.warc/#http://a.example/x`` was printed as
``.../crawl.warc/#http:/a.example/x``, a record that does not exist.
"""

from __future__ import annotations

import json
import os

from conftest import TEXT_A, write


def test_member_keys_are_listed_as_they_are(run, tmp_path):
    corpus = tmp_path / "c"
    keys = ["http://a.example/x", "a//b", "../../up", "./here/"]
    write(corpus / "d.jsonl", "".join(json.dumps({"id": k, "text": TEXT_A}) + "\n" for k in ["!kept"] + keys))  # the smallest id: kept
    write(corpus / "sub" / "f.txt", TEXT_A)
    r = run("dedup", corpus, "--index", tmp_path / "idx", "--id-field", "id", "-t", "0.9", "--absolute", "-0")
    assert r.exit_code == 0, r.stderr
    listed = sorted(os.fsdecode(p) for p in r.stdout_bytes.split(b"\0") if p)
    root = str(corpus)
    expected = sorted([f"{root}/d.jsonl/#{k}" for k in keys] + [f"{root}/sub/f.txt"])
    assert listed == expected
    relative = run("dedup", corpus, "--index", tmp_path / "idx", "-t", "0.9", "-0")
    assert sorted(root + "/" + os.fsdecode(p) for p in relative.stdout_bytes.split(b"\0") if p) == expected
