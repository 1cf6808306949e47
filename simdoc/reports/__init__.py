"""What an index can tell besides its pairs; each returns data and prints nothing.

* :mod:`~simdoc.reports.query`: look documents up without adding them.
* :mod:`~simdoc.reports.check`: verify an index completely.
* :mod:`~simdoc.reports.clusters`: connected components and which member to keep.
* :mod:`~simdoc.reports.tuning`: the S-curve of a banding (``tune``).
* :mod:`~simdoc.reports.stats`: what an index holds (``stats``).
* :mod:`~simdoc.reports.evidence`: why two documents are similar (``simdoc show``);
  :mod:`~simdoc.reports.passages`: the shared passages of two texts.
"""
