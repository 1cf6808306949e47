"""The corpus: which files there are, and how each becomes documents.

* :mod:`~simdoc.corpus.walk`: discover the files of a corpus (include/exclude
  globs, symlinks, hidden files, the index folder left out).
* :mod:`~simdoc.corpus.globs`: ``--include``/``--exclude``, and which skipped paths they cover.
* :mod:`~simdoc.corpus.filelists`: ``--files-from`` and ``--files0-from`` lists.
* :mod:`~simdoc.corpus.files`: one file read safely (non-blocking, checked, decompressed, decoded).
* :mod:`~simdoc.corpus.read`: the one place that decides how a file is read
  (whole, streamed, JSON Lines lines, WARC records, Parquet rows, HTML).
* :mod:`~simdoc.corpus.formats`: JSON Lines members, by line; HTML pages as text.
* :mod:`~simdoc.corpus.parquet`: Parquet rows, by row group (pyarrow, the ``parquet`` extra).
* :mod:`~simdoc.corpus.warc`: the documents of WARC and WET files (:mod:`~simdoc.corpus.warcio`:
  their records, whatever the compression, broken ones found and skipped).
* :mod:`~simdoc.corpus.streaming`: huge texts shingled in bounded pieces.
* :mod:`~simdoc.corpus.file_texts`: the documents of a file named outside an index.

Nothing here knows about the index directory.
"""
