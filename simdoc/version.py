"""simdoc's version: written into every manifest and build id, and shown by ``simdoc --version``.

A module of its own so that the stages can read it without importing the
package's public API (``simdoc/__init__.py``), which loads the pipeline lazily.
"""

__version__ = "0.1.0"
