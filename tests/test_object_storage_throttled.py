"""A throttled store (issue 31): requests answered 503 SlowDown are retried, within a limit.

A small HTTP proxy in front of moto's server answers some object reads with
S3's own throttling reply (503, code SlowDown) and forwards everything else.
A read throttled a few times is retried and gives the answer of the store
unthrottled; an object throttled at every attempt is given up after a bounded
number of requests (botocore's attempts, set by --storage-option, times
s3fs's own 5 tries of a throttled call), as a warning, never a hang.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.conftest import SAMPLE_CORPUS
from tests.http_relay import answer, forward, request_body
from tests.test_object_storage import s3, server, upload  # noqa: F401  (fixtures)

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>simdoc-test</RequestId></Error>"
)


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _any(self) -> None:
        body = request_body(self)
        srv = self.server
        with srv.lock:
            srv.seen[(self.command, self.path)] += 1
            slow = srv.throttle(self.command, self.path, srv.seen[(self.command, self.path)])
        if slow:
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(SLOW_DOWN)
            return
        conn = http.client.HTTPConnection(srv.target.hostname, srv.target.port, timeout=30)
        try:
            answer(self, *forward(self, conn, body))
        finally:
            conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any


@pytest.fixture
def throttled(s3):
    """(endpoint option of a proxy to the server, bucket, the proxy) whose ``throttle(method, path, nth)`` says
    which requests get 503 SlowDown (default: none)."""
    fs, endpoint, bucket, _ = s3
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    proxy.target = urlsplit(endpoint.split("=", 1)[1])
    proxy.lock = threading.Lock()
    proxy.seen = Counter()
    proxy.throttle = lambda method, path, nth: False
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield fs, endpoint, f"endpoint_url=http://127.0.0.1:{proxy.server_address[1]}", bucket, proxy
    proxy.shutdown()
    proxy.server_close()


def _object_read(method: str, path: str) -> bool:
    return method == "GET" and "?" not in path and path.count("/") > 1


def test_reads_throttled_twice_are_retried_and_give_the_unthrottled_answer(run, throttled, tmp_path):
    fs, direct, via_proxy, bucket, proxy = throttled
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    url = f"s3://{bucket}/m/"
    plain = run("pairs", url, "--index", tmp_path / "a.idx", "-j", "1", "--storage-option", direct)
    slow = {f"/{bucket}/m/red-lentil-soup.txt", f"/{bucket}/m/backup/red-lentil-soup-copy.txt"}  # a pair's two
    proxy.throttle = lambda method, path, nth: _object_read(method, path) and path in slow and nth <= 2
    slowed = run("pairs", url, "--index", tmp_path / "b.idx", "-j", "1", "--storage-option", via_proxy)
    assert plain.exit_code == 0 and slowed.exit_code == 0, slowed.stderr
    assert slowed.stdout == plain.stdout and plain.stdout
    assert "warning" not in slowed.stderr
    reads = {p: n for (m, p), n in proxy.seen.items() if _object_read(m, p)}
    assert len(reads) == 10 and all(reads[p] >= 3 for p in slow)  # two 503s, then the read


def test_an_object_throttled_at_every_attempt_is_given_up_within_the_limit(run, throttled, tmp_path):
    fs, _, via_proxy, bucket, proxy = throttled
    upload(fs, SAMPLE_CORPUS / "misc", bucket, "m")
    todo = f"/{bucket}/m/todo.txt"
    proxy.throttle = lambda method, path, nth: path == todo
    r = run(
        "pairs", f"s3://{bucket}/m/", "--index", tmp_path / "idx", "-j", "1", "--storage-option", via_proxy,
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
    )
    assert r.exit_code == 0, r.stderr
    assert "warning: todo.txt: cannot read" in r.stderr and "(1 file skipped)" in r.stderr
    assert "Traceback" not in r.stderr
    tries = sum(n for (m, p), n in proxy.seen.items() if p == todo)
    # botocore's attempts (1 here) x s3fs's own retries (5), for its HEAD and its GET at most
    assert 2 <= tries <= 2 * 1 * 5
