"""The manifest's own integrity: a checksum over its bytes, and a schema every reader checks.

Every other file of an index is checked against the manifest (size, dtype,
shape, CRC-32); the manifest is checked against itself:

* **checksum**: the top-level ``"checksum"`` is the CRC-32 (8 hex digits) of
  the file's bytes with that value written as ``00000000``. Any damaged
  byte, even one that leaves valid JSON (a digit, a blank), is found.
  Manifests written before the checksum existed have none and are still
  read; the schema below then has to catch what it can.
* **schema**: every key simdoc reads is there and has the right type and
  range, no unknown key is (a damaged key name is one), the stages are
  known, each role names a file of its own stage (``<stem>.<build id>.<ext>``,
  so no path leaves the index directory), the corpus is an absolute,
  normalised path, the skipped files' ids are paths inside it, each file's entry is complete,
  and the shapes agree with the document count and the parameters. A
  manifest that passes can be used without a ``KeyError`` or ``TypeError``.

Update the tables here together with the format (``FORMAT_VERSION``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simdoc.errors import CorruptIndex
from simdoc.store.doctable import COLUMN_ROLES, FORMAT_3_MISSING, FORMAT_4_NAMES, NAME_ROLES, is_safe_relative, name_problem

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; same values, slower
    from zlib import crc32

CHECKSUM = "checksum"
_ZERO = "00000000"
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://")  # a corpus at a URL, as simdoc.corpus.objects writes it
_HEX8 = re.compile(r"^[0-9a-f]{8}$")


# ---------------------------------------------------------------- checksum


def dump(manifest: dict) -> bytes:
    """The bytes of a manifest file, with its checksum."""
    body = {k: v for k, v in manifest.items() if k != CHECKSUM}
    body[CHECKSUM] = _ZERO
    raw = (json.dumps(body, indent=2, sort_keys=True) + "\n").encode("utf-8")
    # "checksum" sorts first among the top-level keys, so this is its one occurrence
    # with unescaped quotes (a quote inside a string is written \").
    return raw.replace(_entry(_ZERO), _entry(f"{crc32(raw):08x}"), 1)


def _entry(value: str) -> bytes:
    return f'"{CHECKSUM}": "{value}"'.encode()


def parse(raw: bytes, path: Path) -> object:
    """The manifest's JSON value, its checksum verified when it has one.

    Raises
    ------
    CorruptIndex
        Not JSON, or the checksum does not match the bytes.
    """
    try:
        manifest = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError included
        raise CorruptIndex(str(path), f"manifest cannot be read ({exc})") from None
    if isinstance(manifest, dict) and CHECKSUM in manifest:
        value = manifest[CHECKSUM]
        if not isinstance(value, str) or not _HEX8.match(value):
            raise CorruptIndex(str(path), f"the manifest's checksum {value!r} is not 8 hex digits")
        zeroed = raw.replace(_entry(value), _entry(_ZERO), 1)
        if zeroed == raw and value != _ZERO or crc32(zeroed) != int(value, 16):
            raise CorruptIndex(str(path), "the manifest does not match its checksum (a damaged byte)")
    return manifest


# ---------------------------------------------------------------- schema


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int(lo: int = 0, hi: int | None = None) -> Callable[[object], bool]:
    return lambda x: _is_int(x) and x >= lo and (hi is None or x <= hi)


def _number(lo: float, hi: float) -> Callable[[object], bool]:
    return lambda x: (_is_int(x) or isinstance(x, float)) and math.isfinite(x) and lo < x <= hi


def _one_of(*values: object) -> Callable[[object], bool]:
    return lambda x: isinstance(x, type(values[0])) and x in values


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda x: x is None or check(x)


def _str(x: object) -> bool:
    return isinstance(x, str)


def _bool(x: object) -> bool:
    return isinstance(x, bool)


def _strings(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(s, str) for s in x)


def _build_id(x: object) -> bool:
    return isinstance(x, str) and bool(_HEX16.match(x))


def _corpus(x: object) -> bool:
    # Documents are opened (and printed by `dedup --absolute`) under this folder: it is an
    # absolute, normalised path, so that no id joined to it climbs out through a `..` here;
    # or a URL's bucket and prefix (s3://bucket/prefix) with no empty, "." or ".." part.
    if isinstance(x, str) and (m := _URL.match(x)) and m.group(1) != "file":
        return is_safe_relative(x[m.end() :])
    return isinstance(x, str) and x.startswith("/") and "\0" not in x and os.path.normpath(x) == x


def _skipped_id(x: object) -> bool:
    # Printed by `stats --skipped` as a place in the corpus ("." for the corpus itself).
    return isinstance(x, str) and (x == "." or is_safe_relative(x))


def _skipped_one(s: object) -> bool:
    if not isinstance(s, dict) or not set(s) <= {"id", "reason", "source", "size", "mtime_ns"}:
        return False
    # size and mtime_ns: -1 when the path could not be seen (simdoc.stages.skipped).
    if not _optional(_str)(s.get("reason")) or not all(_int(-1)(s[k]) for k in ("size", "mtime_ns") if k in s):
        return False
    if "source" in s:  # a record of a WARC file left out: SOURCE/#KEY, as a docs-table member's id
        return isinstance(s["source"], str) and isinstance(s.get("id"), str) and name_problem(s["id"], s["source"]) is None
    return _skipped_id(s.get("id"))


def skipped_counts(stage: dict) -> tuple[int, int]:
    """(files skipped, members of WARC or JSON Lines files left out) as a shingle stage lists them."""
    entries = stage.get("skipped", [])
    records = sum(1 for s in entries if "source" in s)
    return len(entries) - records, records


# What the readers' reasons say of a file damaged or cut short, its members inside or after the damage
# lost (simdoc.corpus.warcio, rawstream, formats.CUT_SHORT and CUT_AT_LINE_END, parquet): `-q` names such files, as it
# names the files skipped, where it says nothing of the records left out by design (a crawl's error pages).
DAMAGE_WORDS = ("(file cut short?)", "damaged gzip data", "(numbered from 0) cannot be read")


def damaged_files(stage: dict) -> int:
    """How many files a shingle stage read only in part, damaged or cut short (see :data:`DAMAGE_WORDS`)."""
    reasons = ((s["source"], s.get("reason") or "") for s in stage.get("skipped", []) if "source" in s)
    return len({source for source, reason in reasons if any(w in reason for w in DAMAGE_WORDS)})


def left_out_by_source(stage: dict) -> dict[str, list[dict]]:
    """The members a shingle stage left out (its ``skipped`` entries with a source), by source file."""
    out: dict[str, list[dict]] = {}
    for s in stage.get("skipped", []):
        if "source" in s:
            out.setdefault(s["source"], []).append(s)
    return out


def _newest_ctime(x: object) -> bool:
    # [[device, newest change time of a file of it at the scan], ...]: see simdoc.stages.shingle.
    return isinstance(x, list) and all(isinstance(p, list) and len(p) == 2 and _is_int(p[0]) and _is_int(p[1]) for p in x)


def _skipped(x: object) -> bool:
    return isinstance(x, list) and all(_skipped_one(s) for s in x)


_COUNT = _int(0)

# Top-level keys: (check, required).
_TOP = {
    "format": (_str, True),
    "format_version": (_is_int, True),
    "stages": (lambda x: isinstance(x, dict), True),
    CHECKSUM: (_str, False),
    "generation": (_COUNT, False),
    "reported_generation": (_COUNT, False),
    "simdoc_version": (_str, False),
}

# Per stage: its keys (check, required) besides params/roles/files, its parameters
# (check, required), and its roles: role -> (file stem, extension, dtypes, required).
_I8, _U4, _U8, _U1 = (np.dtype(t).str for t in (np.int64, np.uint32, np.uint64, np.uint8))
_STAGES: dict[str, dict] = {
    "shingle": {
        "keys": {
            "build_id": (_build_id, True),
            "corpus": (_corpus, True),
            "n_docs": (_COUNT, True),
            "scan_id": (_optional(_build_id), False),
            "scanned_at_ns": (_COUNT, False),  # format 3's host-clock scan time, no longer used
            "newest_ctime": (_newest_ctime, False),
            "reading_rules": (_int(1), False),  # absent: 1 (simdoc.corpus.reading_rules.READING_RULES)
            "previous_build": (_optional(_build_id), False),
            "n_empty": (_COUNT, False),
            "n_changed": (_COUNT, False),
            "n_removed": (_COUNT, False),
            "skipped": (_skipped, False),
        },
        "params": {
            "unit": (_one_of("char", "word", "stopword"), True),
            "k": (_int(1, 256), True),
            "lowercase": (_bool, True),
            "hash_seed": (_is_int, False),
            "max_bytes": (_optional(_int(1)), False),
            "follow_symlinks": (_bool, False),
            "include": (_strings, False),
            "exclude": (_strings, False),
            "text_field": (_str, False),
            "id_field": (_optional(_str), False),
            "member_ids": (_is_int, False),
            "main_content": (_bool, False),
            "unicode": (_one_of("none", "NFC", "NFKC"), False),
            "min_length": (_int(0), False),
            "all_responses": (_bool, False),
        },
        "roles": {
            # The shingle sets: only after `simdoc shingle` ran as a stage of its own.
            "indptr": ("shingles.indptr", "npy", (_I8,), False),
            "data": ("shingles.data", "npy", (_U4,), False),
            "counts": ("shingles.counts", "npy", (_U4,), False),
            # The stat columns of format 4 are missing from a format-3 table (read as unknown).
            **{role: (role, "npy", (_I8, _U1), role not in FORMAT_3_MISSING) for role in COLUMN_ROLES},
            # The ids and sources: format 5's or format 4's (_shapes checks that one set is there, whole).
            **{role: (role, "npy", (_I8, _U1), False) for role in NAME_ROLES + FORMAT_4_NAMES},
        },
    },
    "verified": {
        "keys": {"built_from": (_build_id, True), "reading_rules": (_int(1), False)},
        "params": None,  # the shingle stage's parameters, checked there
        "roles": {
            "keys": ("verified.keys", "npy", (_U8,), True),
            "jaccard": ("verified.jaccard", "npy", (np.dtype(np.float64).str,), True),
        },
    },
    "signature": {
        "keys": {"build_id": (_build_id, True), "built_from": (_build_id, True)},
        "params": {
            "num_perm": (_int(1, 65536), True),
            "seed": (_int(0, 2**64 - 1), True),
            "scheme": (_one_of("classic", "oph"), False),
        },
        "roles": {
            "signatures": ("signatures", "npy", (_U4,), True),
            "family": ("minhash.family", "npy", (_U4,), True),
        },
    },
    "index": {
        "keys": {
            "build_id": (_build_id, True),
            "built_from": (_build_id, True),
            "bucket_pairs": (lambda x: isinstance(x, list) and all(_COUNT(v) for v in x), False),
            "largest_bucket": (lambda x: isinstance(x, list) and all(_COUNT(v) for v in x), False),
            "large_buckets": (lambda x: isinstance(x, list) and all(_COUNT(v) for v in x), False),
            "banded": (_COUNT, False),
        },
        "params": {
            "bands": (_int(1), True),
            "rows": (_int(1), True),
            "threshold": (_number(0.0, 1.0), True),
            "explicit": (_bool, True),
            "measure": (_one_of("set", "bag"), False),
            "bag_threshold": (_number(0.0, 0.5), False),
        },
        "roles": {
            "bands": ("bands", "npy", (_U8,), True),
            "buckets": ("buckets", "npy", (_I8,), True),
            "groups": ("groups", "npy", (_I8,), False),
        },
    },
}


class _Problem(Exception):
    pass


def _build_of(name: str) -> str:
    """The build id in a file name ``<stem>.<16 hex>.<ext>`` (a stage without a build id of its own)."""
    parts = name.rsplit(".", 2)
    return parts[1] if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{16}", parts[1]) else "?"


def _keys(obj: object, rules: dict, where: str, extra: tuple[str, ...] = ()) -> None:
    if not isinstance(obj, dict):
        raise _Problem(f"{where} is not a JSON object")
    for key in obj:
        if key not in rules and key not in extra:
            raise _Problem(f"{where} has an unknown key {key!r}")
    for key, (check, required) in rules.items():
        if key not in obj:
            if required:
                raise _Problem(f"{where} has no {key!r}")
        elif not check(obj[key]):
            raise _Problem(f"{where}: {key!r} has a value of the wrong kind ({obj[key]!r})")


def _file_entry(info: object, ext: str, dtypes: tuple[str, ...], where: str) -> None:
    rules = {"bytes": (_COUNT, True), "crc32": (_int(0, 2**32 - 1), False)}  # no CRC: early version 1
    if ext == "npy":
        rules["dtype"] = (lambda d: d in dtypes, True)
        rules["shape"] = (lambda s: isinstance(s, list) and all(_COUNT(n) for n in s), True)
    _keys(info, rules, where)


def _shape(stage: dict, role: str) -> list[int] | None:
    name = stage["roles"].get(role)
    return None if name is None else stage["files"][name]["shape"]


def _expect(stage: dict, role: str, want: list, where: str) -> None:
    """The file of ``role`` has shape ``want`` (None: any length on that axis)."""
    got = _shape(stage, role)
    if got is None:
        return
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        shown = ["*" if w is None else w for w in want]
        raise _Problem(f"{where}: the {role} file has shape {got}, expected {shown}")


def _stage(name: str, stage: object) -> None:
    rule = _STAGES.get(name)
    if rule is None:
        raise _Problem(f"unknown stage {name!r}")
    where = f"stage {name!r}"
    _keys(stage, rule["keys"], where, extra=("params", "roles", "files"))
    for part in ("params", "roles", "files"):
        if not isinstance(stage.get(part), dict):
            raise _Problem(f"{where} has no {part!r} table")
    if rule["params"] is not None:
        _keys(stage["params"], rule["params"], f"{where} params")
    roles, files = stage["roles"], stage["files"]
    for role, (stem, ext, dtypes, required) in rule["roles"].items():
        if role not in roles:
            if required:
                raise _Problem(f"{where} has no {role!r} file")
            continue
        file = roles[role]
        # The name is the stage's own: a role cannot point at another build's file, or outside the index.
        build = stage.get("build_id") or _build_of(file)
        if file != f"{stem}.{build}.{ext}":
            raise _Problem(f"{where}: the {role} file is named {file!r}, expected {stem}.{build}.{ext}")
        if file not in files:
            raise _Problem(f"{where}: the {role} file {file} has no entry in its files table")
        _file_entry(files[file], ext, dtypes, f"{where} file {file}")
    unknown = set(roles) - set(rule["roles"])
    if unknown:
        raise _Problem(f"{where} has an unknown role {sorted(unknown)[0]!r}")
    if set(files) != set(roles.values()):
        raise _Problem(f"{where}: its files table does not list exactly the files of its roles")


def _shapes(stages: dict) -> None:
    """The arrays' shapes agree with the document count and the parameters."""
    shingle, sig, ix = stages.get("shingle"), stages.get("signature"), stages.get("index")
    n = None
    if shingle is not None:
        n = shingle["n_docs"]
        where = "stage 'shingle'"
        _expect(shingle, "indptr", [n + 1], where)
        _expect(shingle, "data", [None], where)
        _expect(shingle, "counts", _shape(shingle, "data"), where)
        for role in COLUMN_ROLES:
            _expect(shingle, role, [n] if role not in ("docs.digest", "docs.file_digest", "docs.identity") else [n, 16], where)
        has = [role for role in NAME_ROLES + FORMAT_4_NAMES if role in shingle["roles"]]
        if sorted(has) not in (sorted(NAME_ROLES), sorted(FORMAT_4_NAMES)):
            raise _Problem(f"{where}: its docs table's ids are neither format 5's {list(NAME_ROLES)} nor format 4's {list(FORMAT_4_NAMES)}")
        for role in ("docs.id", "docs.source", "docs.key", "docs.files"):
            _expect(shingle, role, [None], where)
        for role in ("docs.id.offsets", "docs.source.offsets", "docs.key.offsets"):
            _expect(shingle, role, [n + 1], where)
        runs = _shape(shingle, "docs.files.rows")
        _expect(shingle, "docs.files.rows", [None], where)
        _expect(shingle, "docs.files.offsets", runs or [None], where)
    sig_current = sig is not None and shingle is not None and sig["built_from"] == shingle["build_id"]
    if sig is not None:
        num_perm = sig["params"]["num_perm"]
        where = "stage 'signature'"
        _expect(sig, "signatures", [n if sig_current else None, num_perm], where)
        _expect(sig, "family", [2, num_perm], where)
    if ix is not None:
        p = ix["params"]
        where = "stage 'index'"
        if sig is not None and ix["built_from"] == sig["build_id"] and p["bands"] * p["rows"] > sig["params"]["num_perm"]:
            raise _Problem(f"{where}: bands x rows = {p['bands'] * p['rows']} is more than num_perm")
        current = sig_current and ix["built_from"] == sig["build_id"]
        _expect(ix, "bands", [p["bands"], n if current else None], where)
        _expect(ix, "buckets", [p["bands"], None], where)
        _expect(ix, "groups", [n if current else None], where)


def validate(manifest: dict, path: Path) -> None:
    """Check a parsed manifest against the schema (see the module docstring).

    Raises
    ------
    CorruptIndex
        Naming the manifest and the first thing wrong.
    """
    try:
        _keys(manifest, _TOP, "the manifest")
        for name, stage in manifest["stages"].items():
            _stage(name, stage)
        _shapes(manifest["stages"])
    except _Problem as exc:
        raise CorruptIndex(str(path), str(exc)) from None
