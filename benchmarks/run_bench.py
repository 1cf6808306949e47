#!/usr/bin/env python3
"""Side-by-side benchmark: simdoc against the assembled peer, gaoya, rensa and datasketch.

    python benchmarks/run_bench.py CORPUS
        [--tools simdoc,assembled,assembled-verify,gaoya,rensa,datasketch]
        [--threshold 0.8] [--jobs N] [--out results.json]

Each tool runs in a fresh process tree, one after the other:

* simdoc: ``simdoc pairs CORPUS --index WORKDIR/idx-simdoc --threshold T
  --unit char --k 5 --lowercase --num-perm 128 --jobs N --format tsv``;
  its stdout (``doc_a<TAB>doc_b<TAB>estimated<TAB>jaccard``, paths
  relative to CORPUS) is the pair list. ``--simdoc-cmd`` replaces the
  leading ``simdoc`` (e.g. ``--simdoc-cmd "python -m simdoc"``).
* assembled / assembled-verify / gaoya / rensa / datasketch: ``python
  benchmarks/peers.py PEER CORPUS OUT.tsv ...`` (see peers.py and
  assembled.py); the assembled peers and gaoya get ``--threads`` =
  --peer-threads, which defaults to simdoc's --jobs, so that they use the
  same cores.

A corpus may hold JSON Lines files: each line is a document named
``REL/#LINE``, as simdoc names it (bench_common.py).

Measured per tool:

* wall time, from just before the tool is started to its exit (interpreter
  start-up included, as a user would see it), and user+system CPU time of
  the whole tree;
* memory, two ways, because a tool may fork workers (simdoc --jobs):
  - ``peak_rss_max_mb``: a small wrapper process starts the tool, waits for
    it and reads ``getrusage(RUSAGE_CHILDREN).ru_maxrss``: the kernel's
    exact high-water mark of the largest single process among the tool and
    all its waited-for descendants. Exact, but a maximum, not a sum: two
    workers of 1 GB each show as 1 GB.
  - ``peak_rss_tree_mb`` (needs psutil): this script samples the RSS of
    every process in the tool's tree every 50 ms and keeps the largest sum.
    It sees concurrent workers together but can miss spikes shorter than
    the interval, and counts pages shared between forked processes once per
    process (an over-estimate for fork-based pools).
  For single-process tools both agree up to sampling.
* docs/s and MB/s (MB = 10^6 bytes of document files);
* recall and precision against exact Jaccard (truth.py). The truth is
  every pair with exact Jaccard >= T: found by brute force when the corpus
  has at most --brute-max documents, otherwise the union of all tools'
  output pairs (plus, if .MANIFEST.json is present, every pair inside a
  planted cluster: a source and the documents derived from it) re-scored
  exactly, keeping those >= T. recall = |output & truth| /
  |truth|; precision = share of output pairs whose exact Jaccard >= T
  (threshold compared exactly as a decimal fraction).
* the check "simdoc's true pairs contain each peer's true pairs, except at
  most 1% of the peer's", and every reported exact Jaccard (simdoc's,
  assembled-verify's) against the truth's.
* ratios peer wall time / simdoc wall time, against the targets
  (assembled-verify >= 2.5x and assembled >= 1x from issue 32; datasketch
  >= 11x, rensa >= 4x, gaoya >= 15x from earlier issues), and every tool's
  wall time / the wall time of assembled-verify, the strongest peer
  (RESULTS.md quotes these).

A table goes to stdout; --out writes everything as JSON. Exit status: 0,
or 1 if a tool failed, or (with --strict) 2 if a target or check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import corpus_bytes, expand_members, list_docs, read_pairs_tsv  # noqa: E402
from bench_score import score  # noqa: E402

# gaoya's target is issue 16's: the build at 10^5 at least 15x gaoya's time.
# issue 32: simdoc with exact verification >= 2.5x faster than the assembled peer with
# verification, and faster than the assembled peer estimating only.
TARGETS = {"assembled-verify": 2.5, "assembled": 1.0,
           "datasketch": 11.0, "rensa": 4.0, "gaoya": 15.0}
ALL_TOOLS = ("simdoc", "assembled", "assembled-verify", "gaoya", "rensa", "datasketch")
# the strongest peer: every tool's wall time is also given as a ratio to its
STRONGEST = "assembled-verify"
# "simdoc-base": another simdoc build (--base-cmd, e.g. a checkout of the previous release),
# run the same way, so that a change is measured side by side with the code it replaces.
BASE_TOOL = "simdoc-base"


# --------------------------------------------------------------------------
# measuring one child process tree


def _measure_main(argv: list[str]) -> int:
    """Wrapper mode: ``run_bench.py _measure RESULT.json STDOUT STDERR -- CMD...``.

    Runs CMD, waits for it, and writes wall time and RUSAGE_CHILDREN figures
    (covering CMD and every descendant it waited for) to RESULT.json.
    """
    result, out, err = argv[0], argv[1], argv[2]
    assert argv[3] == "--"
    cmd = argv[4:]
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        except OSError as e:
            fe.write(f"run_bench: cannot start {cmd[0]!r}: {e}\n".encode())
            rc = 127
        else:
            rc = proc.wait()
        wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(result, "w") as fh:
        json.dump({"returncode": rc, "wall_s": wall, "ru_maxrss_kb": ru.ru_maxrss,
                   "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime}, fh)
    return 0


def run_measured(cmd: list[str], workdir: Path, name: str, timeout: float) -> dict:
    res_path = workdir / f"{name}.measure.json"
    out_path = workdir / f"{name}.stdout"
    err_path = workdir / f"{name}.stderr"
    wrapper = [sys.executable, os.path.abspath(__file__), "_measure",
               str(res_path), str(out_path), str(err_path), "--", *cmd]
    try:
        import psutil
    except ImportError:
        psutil = None
    proc = subprocess.Popen(wrapper, start_new_session=True)
    peak_tree = 0
    max_procs = 0
    deadline = time.monotonic() + timeout
    timed_out = False
    wp = psutil.Process(proc.pid) if psutil else None
    while proc.poll() is None:
        if wp is not None:
            total = 0
            try:
                kids = wp.children(recursive=True)
            except psutil.Error:
                kids = []
            for k in kids:
                try:
                    total += k.memory_info().rss
                except psutil.Error:
                    pass
            peak_tree = max(peak_tree, total)
            max_procs = max(max_procs, len(kids))
        if time.monotonic() > deadline:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # the session we started for this tool
            proc.wait()
            break
        time.sleep(0.05)
    m: dict = {"cmd": cmd, "stdout": str(out_path), "stderr": str(err_path)}
    if timed_out or not res_path.exists():
        m.update(ok=False, error=f"timed out after {timeout:.0f} s" if timed_out else "wrapper failed")
        return m
    r = json.loads(res_path.read_text())
    m.update(ok=r["returncode"] == 0, returncode=r["returncode"], wall_s=r["wall_s"],
             cpu_s=r["cpu_user_s"] + r["cpu_sys_s"],
             peak_rss_max_mb=r["ru_maxrss_kb"] * 1024 / 1e6,
             peak_rss_tree_mb=peak_tree / 1e6 if psutil else None,
             max_processes=max_procs if psutil else None)
    if not m["ok"]:
        m["error"] = f"exit status {r['returncode']}"
    return m


# --------------------------------------------------------------------------
# commands


def tool_command(tool: str, args, workdir: Path) -> tuple[list[str], Path]:
    """Command line and the path its pair TSV will be at."""
    corpus = str(args.corpus)
    if tool in ("simdoc", BASE_TOOL):
        base = shlex.split(args.simdoc_cmd if tool == "simdoc" else args.base_cmd)
        idx = workdir / f"idx-{tool}"
        cmd = base + ["pairs", corpus, "--index", str(idx), "--threshold", str(args.threshold),
                      "--unit", "char", "--k", str(args.k), "--lowercase",
                      "--num-perm", str(args.num_perm), "--jobs", str(args.jobs),
                      "--format", "tsv"] + shlex.split(args.simdoc_extra)
        return cmd, workdir / f"{tool}.stdout"
    out = workdir / f"{tool}.pairs.tsv"
    cmd = [sys.executable, os.path.join(HERE, "peers.py"), tool, corpus, str(out),
           "--threshold", str(args.threshold), "--num-perm", str(args.num_perm),
           "--k", str(args.k), "--shingler", args.peer_shingler]
    bands = {"datasketch": args.datasketch_bands, "rensa": args.rensa_bands,
             "gaoya": args.gaoya_bands, "assembled": args.assembled_bands,
             "assembled-verify": args.assembled_bands}[tool]
    if bands:
        cmd += ["--bands", str(bands)]
    if tool in ("gaoya", "assembled", "assembled-verify"):
        cmd += ["--threads", str(args.peer_threads or args.jobs)]
    return cmd, out


def warm_cache(corpus: Path, docs: list[str]) -> float:
    t0 = time.perf_counter()
    for d in docs:
        with open(corpus / d, "rb") as fh:
            while fh.read(1 << 20):
                pass
    return time.perf_counter() - t0


# --------------------------------------------------------------------------
# report


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(res: dict) -> None:
    rows = []
    for tool, t in res["tools"].items():
        q = res["quality"]["tools"].get(tool, {})
        if not t.get("ok"):
            t, q = {"ok": False, "error": t.get("error", "failed")}, {}
        rows.append([tool,
                     fmt(t.get("wall_s"), ".2f"), fmt(t.get("cpu_s"), ".2f"),
                     fmt(t.get("peak_rss_max_mb"), ".0f"), fmt(t.get("peak_rss_tree_mb"), ".0f"),
                     fmt(t.get("docs_per_s"), ".0f"), fmt(t.get("mb_per_s"), ".2f"),
                     fmt(q.get("output_pairs"), "d"), fmt(q.get("true_pairs_found"), "d"),
                     fmt(q.get("recall"), ".4f"), fmt(q.get("precision"), ".4f"),
                     "ok" if t.get("ok") else t.get("error", "failed")])
    head = ["tool", "wall s", "cpu s", "RSS max MB", "RSS tree MB", "docs/s", "MB/s",
            "pairs", "true", "recall", "precision", "status"]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    tr = res["quality"]["truth"]
    print(f"\ntruth: {tr['truth_pairs']} pairs with exact J >= {res['threshold']} "
          f"({tr['method']}); by J: {tr['truth_by_jaccard']}")
    for tool, q in res["quality"]["tools"].items():
        print(f"  {tool} recall by J: {q['recall_by_jaccard']}"
              + (f"; unknown doc paths in {q['unknown_docs_pairs']} pairs" if q["unknown_docs_pairs"] else ""))
        if "reported_jaccard_mismatches" in q:
            print(f"  {tool} reported jaccard: {q['reported_jaccard_mismatches']} mismatches "
                  f"of {q['reported_jaccard_checked']} checked")
    for peer, c in res["quality"]["superset_check"].items():
        print(f"check simdoc true pairs >= {peer} true pairs - 1%: "
              f"{'PASS' if c['ok'] else 'FAIL'} ({c['missing_from_simdoc']} of {c['peer_true_pairs']} "
              f"missing, {c['allowed']} allowed)")
    strong = res.get("against_strongest") or {}
    if strong:
        print(f"wall time / {STRONGEST} wall time (the strongest peer): "
              + ", ".join(f"{t} {r['wall']:.2f}" for t, r in strong.items()))
        print(f"CPU time / {STRONGEST} CPU time (steadier on a shared machine): "
              + ", ".join(f"{t} {r['cpu']:.2f}" for t, r in strong.items()))
    for peer, r in res["ratios"].items():
        if r["target"] is None:
            print(f"speed {peer} / simdoc: {r['ratio']:.2f}x")
            continue
        print(f"speed {peer} / simdoc: {r['ratio']:.2f}x (target >= {r['target']}x: "
              f"{'PASS' if r['ok'] else 'FAIL'})")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_measure":
        return _measure_main(argv[1:])
    ap = argparse.ArgumentParser(
        description="simdoc vs the assembled peer, gaoya, rensa and datasketch, end to end.")
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--tools", default=",".join(ALL_TOOLS))
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="simdoc --jobs")
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--out", help="write results as JSON here")
    ap.add_argument("--simdoc-cmd", default="simdoc", help="command that starts simdoc's CLI")
    ap.add_argument("--base-cmd", help=f"another simdoc to run side by side as the tool {BASE_TOOL!r}")
    ap.add_argument("--simdoc-extra", default="", help="extra arguments appended to simdoc's")
    ap.add_argument("--datasketch-bands", type=int, default=0,
                    help="force datasketch LSH bands (default: its own optimiser)")
    ap.add_argument("--rensa-bands", type=int, default=0,
                    help="rensa LSH bands (default: see peers.py)")
    ap.add_argument("--gaoya-bands", type=int, default=0,
                    help="gaoya LSH bands (default: see peers.py, 16 x 8 at 0.8 / 128)")
    ap.add_argument("--assembled-bands", type=int, default=0,
                    help="the assembled peers' LSH bands (default: 16 x 8 at 0.8 / 128)")
    ap.add_argument("--peer-threads", "--gaoya-threads", type=int, default=0,
                    help="threads of gaoya and the assembled peers (default: the same as --jobs)")
    ap.add_argument("--peer-shingler", choices=("numpy", "plain"), default="numpy")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per tool; the fastest run's numbers are reported")
    ap.add_argument("--brute-max", type=int, default=3000,
                    help="brute-force truth up to this many documents")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per tool run")
    ap.add_argument("--workdir", type=Path, help="keep outputs here (default: a temp dir, removed)")
    ap.add_argument("--no-warm", action="store_true",
                    help="skip reading the corpus once before timing (page cache warm-up)")
    ap.add_argument("--strict", action="store_true",
                    help="exit 2 if a speed target or the superset check fails")
    args = ap.parse_args(argv)

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if args.base_cmd and BASE_TOOL not in tools:
        tools.insert(1 if "simdoc" in tools else 0, BASE_TOOL)
    for t in tools:
        if t not in ALL_TOOLS and not (t == BASE_TOOL and args.base_cmd):
            ap.error(f"unknown tool {t!r} (choose from {', '.join(ALL_TOOLS)}, or {BASE_TOOL} with --base-cmd)")
    corpus = args.corpus.resolve()
    args.corpus = corpus
    if not corpus.is_dir():
        ap.error(f"{corpus} is not a directory")
    files = list_docs(corpus)
    docs = expand_members(corpus, files)  # a JSON Lines file's lines are its documents
    if not docs:
        ap.error(f"no *.txt documents under {corpus}")
    nbytes = corpus_bytes(corpus, docs)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="simdoc-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"corpus {corpus}: {len(docs)} docs, {nbytes / 1e6:.1f} MB; workdir {workdir}",
          file=sys.stderr)
    if not args.no_warm:
        print(f"page cache warm-up read: {warm_cache(corpus, files):.1f} s", file=sys.stderr)

    results: dict = {
        "corpus": str(corpus), "docs": len(docs), "bytes": nbytes,
        "threshold": args.threshold, "k": args.k, "num_perm": args.num_perm, "jobs": args.jobs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "tools": {},
    }
    outputs: dict[str, dict] = {}
    for tool in tools:
        cmd, pairs_path = tool_command(tool, args, workdir)
        exe_found = (os.path.isfile(cmd[0]) and os.access(cmd[0], os.X_OK)) if os.sep in cmd[0] \
            else shutil.which(cmd[0]) is not None
        if tool in ("simdoc", BASE_TOOL) and not exe_found:
            results["tools"][tool] = {"ok": False, "cmd": cmd,
                                      "error": f"{cmd[0]!r} not found (set --simdoc-cmd)"}
            print(f"{tool}: skipped, {cmd[0]!r} not found", file=sys.stderr)
            continue
        runs = []
        for rep in range(args.repeat):
            idx = workdir / f"idx-{tool}"
            if idx.exists():
                shutil.rmtree(idx)
            print(f"{tool}: run {rep + 1}/{args.repeat}: {shlex.join(cmd)}", file=sys.stderr)
            m = run_measured(cmd, workdir, tool, args.timeout)
            runs.append(m)
            if not m["ok"]:
                break
            print(f"{tool}: {m['wall_s']:.2f} s wall, {m['cpu_s']:.2f} s cpu, "
                  f"RSS max {m['peak_rss_max_mb']:.0f} MB", file=sys.stderr)
        if not runs[-1]["ok"]:
            m = runs[-1]
            err_tail = Path(m["stderr"]).read_text(errors="replace")[-2000:] if Path(m["stderr"]).exists() else ""
            m["stderr_tail"] = err_tail
            print(f"{tool}: FAILED ({m.get('error')})\n{err_tail}", file=sys.stderr)
            results["tools"][tool] = m
            continue
        best = min(runs, key=lambda r: r["wall_s"])
        best = dict(best)
        best["walls_s"] = [round(r["wall_s"], 3) for r in runs]
        if len(runs) > 1:
            best["median_wall_s"] = statistics.median(r["wall_s"] for r in runs)
        best["docs_per_s"] = len(docs) / best["wall_s"]
        best["mb_per_s"] = nbytes / 1e6 / best["wall_s"]
        if tool not in ("simdoc", BASE_TOOL):
            for line in Path(best["stderr"]).read_text(errors="replace").splitlines():
                if line.startswith("peers-json: "):
                    best["peer_info"] = json.loads(line[len("peers-json: "):])
        best["pairs_file"] = str(pairs_path)
        results["tools"][tool] = best
        try:
            outputs[tool] = read_pairs_tsv(pairs_path)
        except (OSError, ValueError) as e:
            best["ok"] = False
            best["error"] = f"cannot read pairs: {e}"

    results["quality"] = score(args, corpus, docs, outputs) if outputs else {
        "truth": {}, "tools": {}, "superset_check": {}}
    ratios = {}
    sd = results["tools"].get("simdoc")
    if sd and sd.get("ok"):
        for peer, target in TARGETS.items():
            p = results["tools"].get(peer)
            if p and p.get("ok"):
                r = p["wall_s"] / sd["wall_s"]
                ratios[peer] = {"ratio": r, "target": target, "ok": r >= target}
    base = results["tools"].get(BASE_TOOL)
    if sd and sd.get("ok") and base and base.get("ok"):
        ratios[BASE_TOOL] = {"ratio": base["wall_s"] / sd["wall_s"], "target": None, "ok": True}
    results["ratios"] = ratios
    strong = results["tools"].get(STRONGEST)
    if strong and strong.get("ok"):
        results["against_strongest"] = {
            t: {"wall": r["wall_s"] / strong["wall_s"], "cpu": r["cpu_s"] / strong["cpu_s"]}
            for t, r in results["tools"].items() if r.get("ok")}
    if outputs:
        print_table(results)
    else:
        print("no tool produced pairs: " + "; ".join(
            f"{t}: {r.get('error')}" for t, r in results["tools"].items()))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1, default=str)
        print(f"results written to {args.out}", file=sys.stderr)
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    if not all(t.get("ok") for t in results["tools"].values()):
        return 1
    if args.strict:
        checks = list(results["quality"]["superset_check"].values()) + list(ratios.values())
        if not all(c["ok"] for c in checks) or ("simdoc" in tools and not ratios):
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
