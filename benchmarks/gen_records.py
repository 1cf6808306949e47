#!/usr/bin/env python3
"""Many small records in a few big files: JSON Lines cut from a generated corpus.

    python benchmarks/gen_records.py SOURCE OUTDIR [--records 1000000] [--chars 360]
        [--files 1] [--force]

Crawls and datasets come as a few big shards of millions of small records,
not as a folder of files (issue 29). This cuts the documents of SOURCE (a
corpus from gen_corpus.py, e.g. the 10^5 prose corpus), in its sorted
order, into records of about --chars characters and writes them as JSON
Lines, ``{"text": ...}`` one record a line, to OUTDIR/records.jsonl (or
OUTDIR/records-NN.jsonl for --files > 1, each holding a contiguous run).
simdoc names a record ``records.jsonl/#LINE``; bench_common.py reads it the
same way, so every benchmark script takes OUTDIR as a corpus.

Cutting: a record starts at a document's first non-blank character and ends
at the first whitespace at least --chars characters later (or at the
document's end); a remainder shorter than half of --chars joins the last
record. Records keep the text as written (newlines included, escaped by
JSON). So an exact copy in SOURCE gives identical records, and an edited
copy shares its records up to the first edit, partly overlapping ones after
it. 10^6 records take the first 97,484 documents of the 10^5 corpus (seed
100) and 377.7 MB. The same arguments give byte-identical files.
OUTDIR/.RECORDS.json (hidden, so no tool reads it as a document) records the
parameters; --force replaces only a folder that has it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import list_docs, read_text  # noqa: E402

INFO_NAME = ".RECORDS.json"
_WS = re.compile(r"\s")
_NON_WS = re.compile(r"\S")


def cut(text: str, chars: int) -> list[str]:
    """Records of about ``chars`` characters, cut at whitespace (see the module docstring)."""
    out: list[str] = []
    m = _NON_WS.search(text)
    pos = m.start() if m else len(text)
    while pos < len(text):
        m = _WS.search(text, pos + chars)
        end = m.start() if m else len(text)
        rest = _NON_WS.search(text, end)
        if rest is None or len(text) - rest.start() < chars // 2:
            out.append(text[pos:].rstrip())
            break
        out.append(text[pos:end])
        pos = rest.start()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="JSON Lines records cut from a generated corpus.")
    ap.add_argument("source", type=Path, help="a corpus folder (gen_corpus.py)")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--chars", type=int, default=360, help="about this many characters a record")
    ap.add_argument("--files", type=int, default=1, help="JSON Lines files to spread them over")
    ap.add_argument("--force", action="store_true", help="replace OUTDIR if this script wrote it")
    args = ap.parse_args(argv)
    if args.records < 1 or args.files < 1 or args.chars < 2:
        ap.error("--records, --files and --chars must be positive (--chars at least 2)")
    out = args.outdir
    if out.exists():
        if not (args.force and (out / INFO_NAME).is_file()):
            ap.error(f"{out} exists (--force replaces it only if gen_records.py wrote it)")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    docs = list_docs(args.source)
    per_file = [(args.records * (f + 1)) // args.files - (args.records * f) // args.files
                for f in range(args.files)]
    names = ["records.jsonl"] if args.files == 1 else [f"records-{f:02d}.jsonl" for f in range(args.files)]
    written = 0
    used_docs = 0
    nbytes = 0
    f_i = 0
    fh = open(out / names[0], "w", encoding="utf-8", newline="\n")
    in_file = 0
    try:
        for rel in docs:
            if written == args.records:
                break
            used_docs += 1
            for rec in cut(read_text(args.source / rel), args.chars):
                if written == args.records:
                    break
                if in_file == per_file[f_i]:
                    fh.close()
                    f_i += 1
                    in_file = 0
                    fh = open(out / names[f_i], "w", encoding="utf-8", newline="\n")
                line = json.dumps({"text": rec}) + "\n"
                fh.write(line)
                nbytes += len(line)
                written += 1
                in_file += 1
    finally:
        fh.close()
    if written < args.records:
        print(f"gen_records: {args.source} gives only {written} records of ~{args.chars} "
              f"characters; wrote those", file=sys.stderr)
    info = {"source": str(args.source.resolve()), "records": written, "chars": args.chars,
            "files": names[:f_i + 1], "source_docs_used": used_docs, "bytes": nbytes}
    (out / INFO_NAME).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"gen_records: {written} records from {used_docs} documents, {nbytes / 1e6:.1f} MB "
          f"in {len(names)} file(s), {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
