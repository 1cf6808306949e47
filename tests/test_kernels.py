"""The compiled kernels give exactly the numpy reference's arrays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdoc import jit, kernels
from simdoc.minhash import MinHasher
from simdoc.shinglesets import ShingleSets
from simdoc.shingling import ShingleSpec, normalise, shingle_texts

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba disabled by SIMDOC_NO_NUMBA")


def both(func):
    """func() with the compiled kernels, then with the numpy reference.

    The switch every caller asks (kernel_choice.wanted) is jit.ENABLED: kernels.ENABLED is a
    copy made at import, and turning it off left both calls compiled."""
    compiled = func()
    enabled, jit.ENABLED = jit.ENABLED, False
    try:
        reference = func()
    finally:
        jit.ENABLED = enabled
    return compiled, reference


def test_both_runs_the_reference(monkeypatch):
    """Its second call takes the numpy path: else every test here compares the kernels with themselves."""
    from simdoc import minhash

    taken = []
    real = minhash._oph_rows
    monkeypatch.setattr(minhash, "_oph_rows", lambda *a: taken.append(1) or real(*a))
    compiled, reference = both(lambda: MinHasher(64, 1).signatures(ShingleSets.from_sets([{1, 2}])))
    assert taken == [1] and np.array_equal(compiled, reference)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=80), max_size=10),
    st.sampled_from(["char", "word", "stopword"]),
    st.integers(1, 9),
)
def test_shingles_equal_reference(texts, unit, k):
    spec = ShingleSpec(unit, k)
    compiled, reference = both(lambda: shingle_texts(texts, spec))
    assert compiled.indptr.tolist() == reference.indptr.tolist()
    assert compiled.data.tolist() == reference.data.tolist()
    assert compiled.counts.tolist() == reference.counts.tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=80), max_size=10),
    st.sampled_from(["char", "word"]),
    st.integers(1, 7),
    st.booleans(),
)
def test_ascii_texts_given_as_bytes_shingle_as_their_str(texts, unit, k, lowercase):
    # The shingle workers hand over ASCII documents as bytes, mixed with str ones.
    spec = ShingleSpec(unit, k, lowercase)
    mixed = [t.encode("ascii") if t.isascii() else t for t in texts]
    want = shingle_texts(texts, spec)
    for got in both(lambda: shingle_texts(mixed, spec)):
        assert got.indptr.tolist() == want.indptr.tolist()
        assert got.data.tolist() == want.data.tolist()
        assert got.counts.tolist() == want.counts.tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=80), max_size=10),
    st.integers(1, 7),
    st.booleans(),
    st.booleans(),
)
def test_batches_of_ascii_bytes_shingle_as_their_str(texts, k, lowercase, one_str):
    # A batch of ASCII files only goes to the kernel as one byte string, lowercased there;
    # with one str among them, each piece is widened on its own.
    spec = ShingleSpec("char", k, lowercase)
    given_ = [t.encode("ascii") for t in texts]
    if one_str:
        given_.append("Zé  Ab\tC")
        texts = [*texts, "Zé  Ab\tC"]
    want = shingle_texts([normalise(t, lowercase) for t in texts], spec, normalised=True)
    got = shingle_texts(given_, spec)
    assert got.indptr.tolist() == want.indptr.tolist()
    assert got.data.tolist() == want.data.tolist()
    assert got.counts.tolist() == want.counts.tolist()


def test_stopword_text_equal_reference():
    text = ["It was the best of times, it was the worst of times; and then " * 20, "the a an", "no stops here"]
    c, r = both(lambda: shingle_texts(text, ShingleSpec("stopword", 3)))
    assert np.array_equal(c.data, r.data) and np.array_equal(c.indptr, r.indptr) and np.array_equal(c.counts, r.counts)


def test_signatures_equal_reference():
    rng = np.random.default_rng(2)
    rows = [set(rng.integers(0, 2**32, size=rng.integers(0, 5000), dtype=np.uint64).tolist()) for _ in range(25)]
    sets = ShingleSets.from_sets(rows)
    c, r = both(lambda: MinHasher(128, 5).signatures(sets))
    assert np.array_equal(c, r)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=25), min_size=2, max_size=8), st.data(), st.sampled_from(["set", "bag"]))
def test_pair_jaccard_equal_reference(rows, data, measure):
    from simdoc.similarity import pair_jaccard

    sets = ShingleSets.from_sets(rows)
    n = len(rows)
    left = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=15)))
    right = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=len(left), max_size=len(left))))
    compiled, reference = both(lambda: pair_jaccard(sets, left, right, measure))
    assert np.array_equal(compiled, reference)


_VALUES = st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 30) | st.sampled_from([2**63, 2**64 - 1]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=6), st.data())
def test_pair_intersections_equal_python_set_arithmetic(docs, data):
    # Verification's kernel (pairs of rows of one CSR of sorted 64-bit sets, repeats folded
    # into counts), its numpy twin, and the definitions: empty sets, repeats, a row paired
    # with itself, the same row in many pairs.
    from collections import Counter

    from simdoc.similarity import jaccards_of_sums, pair_sums

    indptr, values, counts = [0], [], []
    for doc in docs:
        v, c = np.unique(np.array(doc, dtype=np.uint64), return_counts=True)
        values.append(v)
        counts.append(c.astype(np.uint32))
        indptr.append(indptr[-1] + len(v))
    sets = ShingleSets(np.array(indptr), np.concatenate(values).astype(np.uint64), np.concatenate(counts))
    n = len(docs)
    left = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=12)), dtype=np.int64)
    right = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=len(left), max_size=len(left))), dtype=np.int64)
    got, twin = both(lambda: pair_sums(sets, left, right))
    assert np.array_equal(got, twin)
    set_j, bag_j = jaccards_of_sums(got)
    for p, (a, b) in enumerate(zip(left.tolist(), right.tolist())):
        ca, cb = Counter(docs[a]), Counter(docs[b])
        union = len(ca.keys() | cb.keys())
        total = len(docs[a]) + len(docs[b])
        assert got[p].tolist() == [len(ca), len(cb), len(ca.keys() & cb.keys()), sum((ca & cb).values()), total]
        assert set_j[p] == (len(ca.keys() & cb.keys()) / union if union else 0.0)
        assert bag_j[p] == (sum((ca & cb).values()) / total if total else 0.0)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60), max_size=6),
    st.integers(1, 6),
    st.booleans(),
)
def test_char_fast_normalisation_equals_reference(texts, k, lower):
    # Includes every Unicode whitespace (tabs, NBSP, U+3000, ...) and case changes of length.
    spec = ShingleSpec("char", k, lowercase=lower)
    compiled, reference = both(lambda: shingle_texts(texts, spec))
    assert compiled.indptr.tolist() == reference.indptr.tolist()
    assert compiled.data.tolist() == reference.data.tolist()


def test_char_fast_normalisation_examples():
    texts = ["  A\u00a0\u3000B\t\nC  ", "\u0130stanbul  X", "", " \x1c\x1d ", "x"]
    compiled, reference = both(lambda: shingle_texts(texts, ShingleSpec("char", 2)))
    assert compiled.data.tolist() == reference.data.tolist()
    assert compiled.indptr.tolist() == reference.indptr.tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 40), st.sampled_from([(1, 8), (2, 4), (4, 2), (3, 2), (8, 1)]), st.integers(0, 2**32 - 1))
def test_band_keys_equal_reference(n_docs, bands_rows, seed):
    from simdoc.lsh import band_keys

    bands, rows = bands_rows
    sig = np.random.default_rng(seed).integers(0, 2**32, (n_docs, 8), dtype=np.uint64).astype(np.uint32)
    sig[: n_docs // 2, :4] = 7  # equal bands must give equal keys on both paths
    read_only = sig.copy()
    read_only.setflags(write=False)  # as mapped from an index
    for s in (sig, read_only):
        compiled, reference = both(lambda: band_keys(s, bands, rows))
        assert compiled.dtype == reference.dtype == np.uint64
        assert np.array_equal(compiled, reference)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**32 - 1)), max_size=40), min_size=1, max_size=6))
def test_unique_rows_of_64_bit_values_equal_reference(rows):
    """Sorted by the full 64 bits even when high halves repeat (few distinct ones here)."""
    from simdoc.shingling import unique_rows

    values = [[(hi << 32) | lo for hi, lo in row] for row in rows]
    indptr = np.cumsum([0] + [len(r) for r in values]).astype(np.int64)
    data = np.array([v for r in values for v in r], dtype=np.uint64)
    got, ref = both(lambda: unique_rows(indptr, data))
    for i, row in enumerate(values):
        want, counts = np.unique(np.array(row, dtype=np.uint64), return_counts=True)
        for sets in (got, ref):
            assert sets.row(i).tolist() == want.tolist() and sets.row_counts(i).tolist() == counts.tolist()


# ---------------------------------------------------------------- where compiled code is cached (issue 17.7)

_COMPILE_ONE = (
    "import numpy as np, simdoc, simdoc.kernels as k\n"
    "k.unique_rows(np.array([0, 1], np.int64), np.ones(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint32), np.zeros(1, np.int64), np.zeros(1, np.uint64))\n"
    "print(simdoc.__file__)\n"
    "print(k.CACHE)\n"
)


def _compile_in_a_copy(tmp_path, first: str = "", **env_extra) -> tuple[list[str], object]:
    """Compile one kernel in a fresh process importing a copy of the package (as if installed there)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    site = tmp_path / "site-packages"
    pkg = site / "simdoc"
    shutil.copytree(Path(kernels.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(tmp_path / "home"), **env_extra)
    r = subprocess.run([sys.executable, "-c", first + _COMPILE_ONE], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert Path(lines[0]).parent == pkg  # the copy was imported, not the working tree
    return lines, pkg


def _cached(root) -> list:
    return [p for p in root.rglob("*") if p.suffix in (".nbi", ".nbc")]


def test_compiled_kernels_are_cached_under_xdg_cache_home_not_in_the_package(tmp_path):
    lines, pkg = _compile_in_a_copy(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert lines[1] == "True"
    assert _cached(tmp_path / "xdg" / "simdoc" / "numba")
    assert _cached(pkg) == [] and not (pkg / "__pycache__").exists()


def test_numba_imported_before_simdoc_still_caches_under_xdg_cache_home(tmp_path):
    _, pkg = _compile_in_a_copy(tmp_path, first="import numba\n", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert _cached(tmp_path / "xdg" / "simdoc" / "numba")
    assert _cached(pkg) == []


def test_without_xdg_cache_home_the_cache_is_under_home(tmp_path):
    _, pkg = _compile_in_a_copy(tmp_path)
    assert _cached(tmp_path / "home" / ".cache" / "simdoc" / "numba")
    assert _cached(pkg) == []


def test_a_numba_cache_dir_the_user_set_is_respected(tmp_path):
    _, pkg = _compile_in_a_copy(tmp_path, NUMBA_CACHE_DIR=str(tmp_path / "mine"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert _cached(tmp_path / "mine")
    assert not (tmp_path / "xdg" / "simdoc" / "numba").exists()
    assert _cached(pkg) == []


def test_no_usable_cache_dir_compiles_without_caching(tmp_path):
    (tmp_path / "not-a-dir").write_text("")
    lines, pkg = _compile_in_a_copy(tmp_path, XDG_CACHE_HOME=str(tmp_path / "not-a-dir"))
    assert lines[1] == "False"
    assert _cached(pkg) == [] and not (pkg / "__pycache__").exists()


_SETS64 = (
    "import numpy as np\n"
    "from simdoc import bytesign\n"
    "from simdoc.shingling import ShingleSpec\n"
    "s = bytesign.sets64_texts([b'the quick brown fox jumps over the lazy dog again'], ShingleSpec())\n"
    "print(bool((s.data[1:] > s.data[:-1]).all()))\n"
)


def test_a_changed_callee_is_not_run_stale_from_a_cached_caller(tmp_path):
    # numba checks a cached kernel against its own file only: sets64_utf8 (kernels_bytes.py)
    # cached with the sort64_fold of kernels_sort.py would keep it after kernels_sort.py changed.
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pkg = tmp_path / "site" / "simdoc"
    shutil.copytree(Path(kernels.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(pkg.parent), PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "xdg"))

    def sorted_sets() -> str:
        r = subprocess.run([sys.executable, "-c", _SETS64], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert sorted_sets() == "True"
    source = (pkg / "kernels_sort.py").read_text()
    sort = "    def sort64_fold(a, tmp, out_data, out_counts, pos):\n"
    assert sort in source
    # A sort64_fold that folds short rows unsorted: the caller must see it.
    broken = source.replace(sort, sort + "        if a.shape[0] < 1000:\n            return fold_repeats(a, out_data, out_counts, pos)\n", 1)
    (pkg / "kernels_sort.py").write_text(broken)
    assert sorted_sets() == "False"


# ---------------------------------------------------------------- what loading the kernels costs (issue 29)

_LOAD_KERNELS = (
    "import sys, importlib.util\n"
    "import simdoc.kernels as k, simdoc.kernels_bytes as kb\n"
    "k.warm_up(); kb.warm_up()\n"
    "print(k.ENABLED, 'scipy.linalg' in sys.modules, sys.modules.get('scipy.linalg.cython_blas', 'absent'))\n"
    "if importlib.util.find_spec('scipy') is not None:\n"
    "    import scipy.linalg.cython_blas  # still importable: numba's question was answered, nothing broken\n"
)


def test_loading_the_kernels_does_not_import_scipy_for_numba(tmp_path):
    # numba asks once whether scipy's BLAS is there (for np.correlate's choice of dot product, which
    # no kernel calls): the import of scipy.linalg it costs was ~0.25 CPU-s of every nightly update.
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "SIMDOC_NO_NUMBA"}
    env["PYTHONPATH"] = str(Path(kernels.__file__).parent.parent)
    r = subprocess.run([sys.executable, "-c", _LOAD_KERNELS], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first == "True False absent", r.stdout
