"""A corpus served over HTTP (issue 31): ``simdoc pairs http://HOST:PORT/corpus/``, against Python's
own http.server on 127.0.0.1, which serves a folder and lists each directory as a page of links.

fsspec's HTTP file system lists a prefix by following the links of its
pages; the listing gives no size, so each object is asked (a HEAD: its size
and Last-Modified; an ETag where the server sends one). A server without
ETags gives no identity that proves an object unchanged: every run reads
every object again, as the README says. The answers are those of the same
folder on disk; an unreachable server and a prefix with nothing under it
are one `Error:` line each, exit 3.
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from tests.conftest import SAMPLE_CORPUS, assert_clean_error, numbered_page, write


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def web(tmp_path):
    """(the folder served, its URL)."""
    pytest.importorskip("aiohttp")  # fsspec's HTTP file system
    root = tmp_path / "served"
    root.mkdir()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _corpus(folder):
    for sub in ("essays", "news"):
        for p in (SAMPLE_CORPUS / sub).rglob("*.txt"):
            write(folder / sub / p.relative_to(SAMPLE_CORPUS / sub), p.read_text(encoding="utf-8"))
    for i in range(4):
        write(folder / "pages" / f"p{i}.txt", numbered_page(i % 2, change=i // 2))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_corpus_over_http_gives_what_the_folder_gives(run, web, tmp_path, jobs):
    root, site = web
    folder = root / "corpus"
    _corpus(folder)
    url = f"{site}/corpus/"
    opts = ("-j", jobs, "--format", "tsv", "--threshold", "0.5", "--new")
    local = run("pairs", folder, "--index", tmp_path / "local.idx", *opts)
    remote = run("pairs", url, "--index", tmp_path / "http.idx", *opts)
    assert local.exit_code == 0 and remote.exit_code == 0, (local.stderr, remote.stderr, remote.exception)
    assert remote.stdout == local.stdout and "pages/p0.txt\tpages/p2.txt" in remote.stdout
    for cmd in (["clusters"], ["dedup"]):
        here = run(*cmd, folder, "--index", tmp_path / "local.idx")
        there = run(*cmd, url, "--index", tmp_path / "http.idx")
        assert there.exit_code == 0 and "warning" not in there.stderr, there.stderr
        assert there.stdout == here.stdout and here.stdout
    absolute = run("dedup", url, "--index", tmp_path / "http.idx", "--absolute")
    assert absolute.stdout.split() == [f"{url}{d}" for d in run("dedup", folder, "--index", tmp_path / "local.idx").stdout.split()]
    # A night: a new near copy (in the folder served); --new reports it alone, as from the folder.
    write(folder / "pages" / "q.txt", numbered_page(1, change=7))
    local = run("pairs", folder, "--index", tmp_path / "local.idx", *opts)
    remote = run("pairs", url, "--index", tmp_path / "http.idx", *opts)
    assert remote.exit_code == 0, remote.stderr
    assert remote.stdout == local.stdout and "pages/q.txt" in remote.stdout


def test_an_object_named_over_http_is_that_file(run, web, tmp_path):
    root, site = web
    _corpus(root / "corpus")
    local = run("pairs", root / "corpus" / "pages" / "p0.txt", "--index", tmp_path / "a.idx", "--format", "tsv")
    remote = run("pairs", f"{site}/corpus/pages/p0.txt", "--index", tmp_path / "b.idx", "--format", "tsv")
    assert remote.exit_code == local.exit_code == 0, (remote.stderr, remote.exception)
    assert "1 document" in remote.stderr and remote.stdout == local.stdout


def test_an_unreachable_server_and_an_empty_prefix_are_one_error_each(run, web, tmp_path):
    root, site = web
    _corpus(root / "corpus")
    nothing = run("pairs", f"{site}/nothing/", "--index", tmp_path / "a.idx")
    assert_clean_error(nothing, 3, "does not exist", "check the address")
    assert "bucket" not in nothing.stderr
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = run("pairs", f"http://127.0.0.1:{port}/corpus/", "--index", tmp_path / "b.idx")
    assert_clean_error(gone, 3, "cannot list", "check the address and the network")
    assert "endpoint_url" not in gone.stderr  # an S3 option: no use for a web server
