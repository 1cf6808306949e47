"""Relaying one HTTP request to a server and its answer back: the part of a test proxy in front of
moto that every such proxy shares (tests/test_object_storage_throttled.py throttles some requests,
benchmarks/bench_s3.py counts the bytes of each answer)."""

from __future__ import annotations

import http.client
from http.server import BaseHTTPRequestHandler

# Hop-by-hop or rewritten by BaseHTTPRequestHandler: passing them on would send them twice or wrongly.
_NOT_PASSED_ON = ("transfer-encoding", "connection", "content-length", "server", "date")


def request_body(handler: BaseHTTPRequestHandler) -> bytes | None:
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else None


def forward(handler: BaseHTTPRequestHandler, conn: http.client.HTTPConnection, body: bytes | None):
    """Send ``handler``'s request over ``conn``: the server's response and its body, read whole."""
    conn.request(handler.command, handler.path, body, headers=dict(handler.headers))
    resp = conn.getresponse()
    return resp, resp.read()


def answer(handler: BaseHTTPRequestHandler, resp: http.client.HTTPResponse, data: bytes) -> None:
    """Answer the client with the server's status, headers and body. A HEAD keeps the server's
    Content-Length (the object's size)."""
    handler.send_response(resp.status)
    for k, v in resp.getheaders():
        if k.lower() not in _NOT_PASSED_ON:
            handler.send_header(k, v)
    length = resp.getheader("Content-Length") if handler.command == "HEAD" else None
    handler.send_header("Content-Length", length or str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
