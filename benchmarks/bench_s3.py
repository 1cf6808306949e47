"""A corpus from a local S3 server against the same corpus from disk (issue 31): wall time and bytes read.

    python benchmarks/bench_s3.py CORPUS WORKDIR [--dirs N] [--fraction 0.01] [--jobs 2] [--simdoc-cmd 'python -m simdoc']

CORPUS (a folder of folders, as benchmarks/gen_corpus.py writes; not modified)
is copied to WORKDIR/corpus (the first ``--dirs`` folders only, if given)
and put into a bucket of a moto S3 server started on 127.0.0.1 (moto's
server mode, in this process; moto[server] and s3fs must be installed).
simdoc reaches the server through a small counting proxy in this process,
which adds the bytes of every answer's body up by kind: listings, HEADs,
and object reads (GET), each object read counted against its key.

Then, in one run:

1. ``simdoc pairs WORKDIR/corpus`` (from disk) and ``simdoc pairs s3://bucket/c/``
   (from the server): wall time of each, bytes read from the server, and the
   two outputs compared (they must be byte-identical);
2. a nightly change: ``--fraction`` of the documents changed as
   benchmarks/bench_update.py changes them (half edited, 30% added, 20%
   deleted), on disk and in the bucket alike; ``simdoc pairs --new`` over
   both: wall time, and the bytes read from the server split into the
   objects the change wrote (read by the scan; verification reads the copy
   the run kept, see simdoc.corpus.object_spill)
   and the unchanged objects read again (the partners of new pairs, for
   their exact verification), each as a share of the corpus's bytes.

Wall times from the server include moto (Python, in this process, sharing
its cores with simdoc) and the proxy: they are an upper bound of what a
real S3 endpoint on a fast network costs; bytes are exact.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from bench_update import mutate  # noqa: E402

from tests.http_relay import answer, forward, request_body  # noqa: E402

KEYS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
BUCKET, PREFIX = "simdoc-bench", "c"


class _Counting(BaseHTTPRequestHandler):
    """Forwards every request to moto and counts the bytes of each answer's body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and the client's
        # delayed ACK hold every answer back ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _any(self) -> None:
        body = request_body(self)
        srv = self.server
        conn = getattr(srv.local, "conn", None)
        if conn is None:
            conn = srv.local.conn = http.client.HTTPConnection(srv.target.hostname, srv.target.port, timeout=120)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            resp, data = forward(self, conn, body)
        except (OSError, http.client.HTTPException):
            srv.local.conn = None
            raise
        path, _, query = self.path.partition("?")
        kind = "head" if self.command == "HEAD" else "list" if self.command == "GET" and query else self.command.lower()
        with srv.lock:
            srv.bytes[kind] += len(data)
            srv.requests[kind] += 1
            if kind == "get":
                srv.objects[unquote(path)] += len(data)
                srv.reads[unquote(path)] += 1
        answer(self, resp, data)  # after counting: when simdoc has its answer, the count is complete

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any


def start_proxy(target: str) -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    srv.daemon_threads = True
    srv.target, srv.lock, srv.local = urlsplit(target), threading.Lock(), threading.local()
    reset(srv)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def reset(srv) -> None:
    srv.bytes, srv.requests, srv.objects, srv.reads = Counter(), Counter(), Counter(), Counter()


def files_of(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def upload(fs, files: dict[str, Path], batch: int = 2000) -> None:
    names = list(files)
    for i in range(0, len(names), batch):
        fs.pipe({f"{BUCKET}/{PREFIX}/{n}": files[n].read_bytes() for n in names[i : i + batch]}, batch_size=64)


def said(what: str, **figures) -> None:
    """A step done, on stderr at once: a run cut short still tells what it measured."""
    print(f"{time.strftime('%H:%M:%S')} {what}: {json.dumps(figures)}", file=sys.stderr, flush=True)


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return dt, p.stdout, p.stderr


def read_figures(srv, corpus_bytes: int, written: set[str] = frozenset()) -> dict[str, object]:
    """What the server sent: bytes and requests by kind; object bytes split by what the change wrote."""
    mine = {f"/{BUCKET}/{PREFIX}/{n}" for n in written}
    new_bytes = sum(b for k, b in srv.objects.items() if k in mine)
    old_bytes = sum(b for k, b in srv.objects.items() if k not in mine)
    out = {
        "bytes": dict(srv.bytes), "requests": dict(srv.requests),
        "objects_read": len(srv.objects), "object_bytes_pct_of_corpus": round(100 * srv.bytes["get"] / corpus_bytes, 3),
    }
    if written:
        out.update({
            "changed_objects_read": sum(1 for k in srv.objects if k in mine),
            "changed_objects_reads": sum(n for k, n in srv.reads.items() if k in mine),
            "changed_bytes_read": new_bytes, "changed_pct": round(100 * new_bytes / corpus_bytes, 3),
            "unchanged_objects_read": sum(1 for k in srv.objects if k not in mine),
            "unchanged_bytes_read": old_bytes, "unchanged_pct": round(100 * old_bytes / corpus_bytes, 3),
            "listing_bytes": srv.bytes["list"], "listing_requests": srv.requests["list"],
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--dirs", type=int, default=None, help="only the first N folders of CORPUS (1,000 files each in c100k)")
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--simdoc-cmd", default=f"{sys.executable} -m simdoc")
    args = ap.parse_args()
    import s3fs
    from moto.server import ThreadedMotoServer

    simdoc = args.simdoc_cmd.split()
    work = args.workdir
    if work.exists():
        shutil.rmtree(work)
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    dirs = sorted(p for p in args.corpus.iterdir() if p.is_dir() and not p.name.startswith("."))
    for d in dirs[: args.dirs] if args.dirs else dirs:
        shutil.copytree(d, corpus / d.name, ignore=shutil.ignore_patterns(".*"))
    subprocess.run(["find", str(corpus), "-type", "f", "-exec", "touch", "-d", "2 days ago", "{}", "+"], check=True)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    proxy = start_proxy(f"http://{host}:{port}")
    endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
    fs = s3fs.S3FileSystem(key=KEYS["AWS_ACCESS_KEY_ID"], secret=KEYS["AWS_SECRET_ACCESS_KEY"], endpoint_url=f"http://{host}:{port}")
    fs.mkdir(BUCKET)
    files = files_of(corpus)
    t0 = time.perf_counter()
    upload(fs, files)
    t_upload = time.perf_counter() - t0
    said("uploaded", objects=len(files), seconds=round(t_upload, 1))
    size = sum(p.stat().st_size for p in files.values())
    env = {**os.environ, **KEYS}
    common = ["--threshold", str(args.threshold), "-j", str(args.jobs), "-q", "--new"]
    url, so = f"s3://{BUCKET}/{PREFIX}/", ["--storage-option", f"endpoint_url={endpoint}"]

    t_disk, out_disk, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "disk.idx"), *common], env)
    said("first pairs from disk", seconds=round(t_disk, 2), pairs=len(out_disk.splitlines()))
    reset(proxy)
    t_s3, out_s3, _ = run([*simdoc, "pairs", url, "--index", str(work / "s3.idx"), *common, *so], env)
    first = read_figures(proxy, size)
    said("first pairs from the bucket", seconds=round(t_s3, 2), same=out_s3 == out_disk, read=first)

    before = files_of(corpus)
    stamp = {n: p.stat().st_mtime_ns for n, p in before.items()}
    changes = mutate(corpus, args.fraction, args.seed)
    after = files_of(corpus)
    written = {n for n, p in after.items() if n not in stamp or p.stat().st_mtime_ns != stamp[n]}
    gone = [n for n in before if n not in after]
    upload(fs, {n: after[n] for n in sorted(written)})
    if gone:
        fs.rm([f"{BUCKET}/{PREFIX}/{n}" for n in gone])
    size_after = sum(p.stat().st_size for p in after.values())

    tn_disk, new_disk, _ = run([*simdoc, "pairs", str(corpus), "--index", str(work / "disk.idx"), *common], env)
    said("nightly from disk", seconds=round(tn_disk, 2), new_pairs=len(new_disk.splitlines()))
    reset(proxy)
    tn_s3, new_s3, _ = run([*simdoc, "pairs", url, "--index", str(work / "s3.idx"), *common, *so], env)
    nightly = read_figures(proxy, size_after, written)
    result = {
        "documents": len(files), "corpus_bytes": size, "upload_s": round(t_upload, 1),
        "pairs_from_disk_s": round(t_disk, 2), "pairs_from_s3_s": round(t_s3, 2), "s3_over_disk": round(t_s3 / t_disk, 2),
        "pairs": len(out_disk.splitlines()), "same_pairs": out_disk == out_s3, "first_build_read": first,
        "changes": changes, "written_objects": len(written), "written_bytes": sum(after[n].stat().st_size for n in written),
        "written_pct": round(100 * sum(after[n].stat().st_size for n in written) / size_after, 3),
        "nightly_from_disk_s": round(tn_disk, 2), "nightly_from_s3_s": round(tn_s3, 2),
        "new_pairs": len(new_disk.splitlines()), "same_new_pairs": new_disk == new_s3, "nightly_read": nightly,
    }
    print(json.dumps(result, indent=2))
    proxy.shutdown()
    moto.stop()
    if not (result["same_pairs"] and result["same_new_pairs"]):
        sys.exit("the bucket's pairs differ from the disk's")


if __name__ == "__main__":
    main()
