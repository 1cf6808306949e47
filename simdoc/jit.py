"""numba set-up shared by the compiled kernels: whether numba is used, where compiled code is cached.

Every module of compiled loops (:mod:`simdoc.kernels`, :mod:`simdoc.kernels_sort`,
:mod:`simdoc.kernels_bytes`) decorates its functions with ``njit(cache=CACHE)``
only if :data:`ENABLED`; the numpy code elsewhere is the reference they equal.

Set ``SIMDOC_NO_NUMBA=1`` to use the numpy reference (e.g. where numba has
no wheel yet); :data:`ENABLED` tells which is in use.

The compiled code is cached in ``$NUMBA_CACHE_DIR`` if the user set it, else
in a folder of ``$XDG_CACHE_HOME/simdoc/numba`` (``~/.cache/simdoc/numba``)
named by the digest of the kernels' source (:func:`kernels_digest`): never next to
the package. numba's own default is the package's ``__pycache__``, which pip
does not know about and leaves behind on uninstall; that folder then turns
``site-packages/simdoc`` into a namespace package that shadows a later
``pip install -e .``. If no cache folder can be made, the kernels are compiled
in every process instead (a few seconds) rather than cached in the package.
"""

from __future__ import annotations

import hashlib
import os
import sys


def cache_dir() -> str:
    """Where compiled kernels are cached: $NUMBA_CACHE_DIR, else a folder of
    $XDG_CACHE_HOME/simdoc/numba named by :func:`kernels_digest`."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "simdoc", "numba", kernels_digest())


def kernels_digest() -> str:
    """A digest of the compiled modules' source (this one and ``kernels*.py``).

    numba checks a cached function against its own file only: a kernel whose
    callee in another module changed (kernels_bytes.sets64_utf8 calling
    kernels_sort.sort64) would be loaded as it was compiled, with the old
    callee (seen: a sort64 changed, the cached caller kept the old one). A
    folder per version of the kernels' source cannot hold such a mix.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(os.listdir(here)):
        if name == "jit.py" or (name.startswith("kernels") and name.endswith(".py")):
            with open(os.path.join(here, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()


def _usable(directory: str) -> bool:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK | os.X_OK)


_BLAS = "scipy.linalg.cython_blas"  # what numba imports to learn whether BLAS is there

ENABLED = False
CACHE = False  # whether compiled kernels are written to cache_dir()
if os.environ.get("SIMDOC_NO_NUMBA", "") in ("", "0"):
    CACHE = _usable(cache_dir())
    if CACHE:
        # numba reads the variable once, when it is first imported (here, or by worker processes).
        os.environ["NUMBA_CACHE_DIR"] = cache_dir()
    try:
        import numba

        ENABLED = True
    except ImportError:  # pragma: no cover - numba is a dependency; this is the escape hatch
        ENABLED = False
    if ENABLED and "numba.np.arraymath" not in sys.modules and _BLAS not in sys.modules:
        # numba.np.arraymath, which every process that compiles or loads a kernel imports, asks
        # once whether scipy's BLAS is there (import scipy.linalg.cython_blas): ~0.25 CPU-s of
        # scipy, in the process of a nightly update and of every build, for an answer that only
        # np.dot's choice in np.correlate and np.convolve uses, which no kernel calls. Told "no"
        # (a None entry fails that one import at once), then forgotten: linear algebra compiled
        # later (not here) still imports scipy's BLAS itself when it is compiled.
        sys.modules[_BLAS] = None
        try:
            import numba.np.arraymath  # noqa: F401
        finally:
            if sys.modules.get(_BLAS, 0) is None:
                del sys.modules[_BLAS]
    if ENABLED and CACHE and numba.config.CACHE_DIR != cache_dir():
        # numba was imported before simdoc, without NUMBA_CACHE_DIR: point it here anyway
        # (the cache locator reads the setting when a function is decorated, in the kernel modules).
        numba.config.CACHE_DIR = cache_dir()
