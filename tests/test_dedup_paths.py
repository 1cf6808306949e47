"""Dedup.path: a document's id as it is, or joined to the corpus folder named (`dedup --absolute`)."""

import ntpath
import types

import pytest

import simdoc.reports.library as library
from simdoc.errors import UsageError
from simdoc.reports.library import Dedup


def _dedup(root):
    return Dedup(decisions=[], keep="first", root=root, sizes={}, clusters=None)


def test_posix_paths_join_the_id_verbatim():
    d = _dedup("/srv/corpus/")
    assert d.path("notes/a.txt") == "notes/a.txt"
    assert d.path("notes/a.txt", absolute=True) == "/srv/corpus/notes/a.txt"
    # A member's key may hold anything, empty parts too: kept as it is, not normalised away.
    assert d.path("crawl.warc.gz/#http://a.example/", absolute=True) == "/srv/corpus/crawl.warc.gz/#http://a.example/"


def test_on_windows_a_files_id_is_joined_part_by_part(monkeypatch):
    """The branch for a system whose separator is not "/" (never run on this project's Linux CI
    otherwise): the id's "/" parts joined with the system's own separator."""
    fake_os = types.SimpleNamespace(sep="\\", path=ntpath)
    monkeypatch.setattr(library, "os", fake_os)
    d = _dedup("C:\\corpus")
    assert d.path("notes/a.txt") == "notes/a.txt"
    assert d.path("notes/a.txt", absolute=True) == "C:\\corpus\\notes\\a.txt"
    assert d.path("a.txt", absolute=True) == "C:\\corpus\\a.txt"


def test_absolute_paths_need_the_corpus_named():
    with pytest.raises(UsageError, match="absolute paths need the CORPUS named"):
        _dedup(None).path("a.txt", absolute=True)
    assert _dedup(None).path("a.txt") == "a.txt"
