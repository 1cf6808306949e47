"""The README's commands, recipes and crontab line run exactly as printed (issue 17, item 12).

Every shell block of README.md is run line by line (a command spanning
lines, such as a `while` loop, as one), in document order, by bash in one
scratch folder that holds the names the README uses: `sample_corpus`,
`my_corpus`, `my_folder` (with `doc-a.txt` and `doc-b.txt`), `data.jsonl`, `data.parquet`,
`crawl.warc.gz` and `crawl.warc.wet.gz`, made from the sample corpus. `simdoc` is on PATH from
the venv this suite runs in, and HOME and XDG_CACHE_HOME point into the
scratch folder, so nothing outside it is touched. Commands meant for the
clone itself (`make run`, `.venv/bin/python ...`) run in the repository.
Blocks that show a `$ command` and its output are checked against it, and
so is the output printed after "`make run` prints". The few commands that
cannot run here are listed in NOT_RUN with the reason; every other command
of the README runs.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE_CORPUS, warc_record

README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent

# Commands (by how they start) that are not run, and why.
NOT_RUN = {
    "make test": "runs this very suite",
    "pip install": "installs into the environment from the package index; the suite runs in the venv that "
    "`make test` set up with the test extra, which holds the web, zstd and dask extras",
    "dask scheduler": "starts a Dask scheduler that runs until stopped, for workers on other hosts",
    "dask worker": "needs a Dask scheduler on another host",
    "simdoc pairs /shared/crawl": "needs a Dask cluster and a file system shared by its hosts",
    "simdoc pairs s3://": "needs an S3 endpoint and a bucket: tests/test_object_storage.py runs these against moto's server",
    "simdoc dedup s3://": "needs an S3 endpoint and a bucket: tests/test_object_storage.py runs these against moto's server",
}
# Commands that belong to a clone of the repository, not to a user's folder.
IN_CLONE = ("make ", ".venv/")
MAKE_VARIABLES = {"MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES"}


@dataclass
class Block:
    lang: str
    line: int
    text: str


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(m.group(1), text[: m.start()].count("\n") + 1, m.group(2))
        for m in re.finditer(r"^```(\w*)\n(.*?)^```\n", text, re.S | re.M)
    ]


def block_after(phrase: str) -> Block:
    """The first block after the line of the README that says ``phrase``."""
    text = README.read_text(encoding="utf-8")
    line = text[: text.index(phrase)].count("\n") + 1
    return next(b for b in readme_blocks() if b.line > line)


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block, a command that spans lines joined into one."""
    commands, pending = [], []
    for line in block.text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        candidate = "\n".join(pending)
        if subprocess.run(["bash", "-n", "-c", candidate], capture_output=True).returncode == 0:
            commands.append(candidate)
            pending = []
    assert not pending, f"README line {block.line}: an unfinished command: {pending}"
    return commands


def not_run_reason(command: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def crontab_commands() -> list[str]:
    """The command of each crontab block, in README order: a folder's, then a bucket's."""
    commands = []
    for block in [b for b in readme_blocks() if b.lang == "crontab"]:
        (entry,) = [ln for ln in block.text.splitlines() if ln.strip() and not ln.startswith("#")]
        commands.append(entry.split(None, 5)[5])  # after minute, hour, day of month, month and day of week
    return commands


def crontab_command() -> str:
    """The folder's crontab line, the one these tests run (a bucket's needs an S3 endpoint)."""
    return crontab_commands()[0]


def test_the_buckets_crontab_line_is_the_folders_with_the_corpus_a_url():
    # tests/test_object_storage*.py run `pairs s3://... --new` against moto; here the printed
    # line must stay the tested folder line with only the corpus changed.
    folder, bucket = crontab_commands()
    assert "$HOME/crawl " in folder
    assert bucket == folder.replace("$HOME/crawl ", "s3://my-bucket/crawl/ ", 1)


# ---------------------------------------------------------------- the scratch folder


def _texts() -> dict[str, str]:
    return {
        p.relative_to(SAMPLE_CORPUS).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(SAMPLE_CORPUS.rglob("*.txt"))
    }


def _make_folder(work: Path) -> None:
    shutil.copytree(SAMPLE_CORPUS, work / "sample_corpus")
    shutil.copytree(SAMPLE_CORPUS, work / "my_corpus")
    folder = shutil.copytree(SAMPLE_CORPUS, work / "my_folder")
    # Two new documents near the README's cut of 0.7: every 4th word changed gives a Jaccard of 0.73.
    vocabulary = sorted({w for t in _texts().values() for w in t.split()})
    rng = random.Random(17)
    words = [rng.choice(vocabulary) for _ in range(300)]
    (folder / "doc-a.txt").write_text(" ".join(words), encoding="utf-8")
    (folder / "doc-b.txt").write_text(" ".join(w + "x" if i % 4 == 0 else w for i, w in enumerate(words)), encoding="utf-8")
    texts = list(_texts().values())
    rows = [{"id": 4700 + i, "text": t} for i, t in enumerate(texts)] + [{"id": 9999, "text": texts[0]}]
    (work / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    import pyarrow as pa  # the test extra holds the parquet extra
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), work / "data.parquet", row_group_size=8)
    pages = [(f"http://example.org/{name}", f"<html><body><p>{t}</p></body></html>") for name, t in _texts().items()]
    pages.append(("http://mirror.example.org/soup", pages[0][1].replace("<p>", "<p><b>")))  # a copy of the first page
    (work / "crawl.warc.gz").write_bytes(
        b"".join(
            gzip.compress(warc_record(uri, body.encode(), n, "text/html; charset=utf-8"))
            for n, (uri, body) in enumerate(pages)
        )
    )
    # The same pages as Common Crawl's WET text: conversion records, one gzip member each.
    conversions = []
    for uri, body in pages:
        text = re.sub("<[^>]+>", "", body).encode()
        head = f"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: {uri}\r\nContent-Type: text/plain\r\n"
        conversions.append(gzip.compress(head.encode() + f"Content-Length: {len(text)}\r\n\r\n".encode() + text + b"\r\n\r\n"))
    (work / "crawl.warc.wet.gz").write_bytes(b"".join(conversions))
    home = work / "home"
    (home / "simdoc" / ".venv" / "bin").mkdir(parents=True)
    os.symlink(VENV_BIN / "simdoc", home / "simdoc" / ".venv" / "bin" / "simdoc")  # a clone in ~/simdoc
    shutil.copytree(SAMPLE_CORPUS, home / "crawl")
    (home / "reports").mkdir()


def _environment(work: Path) -> dict[str, str]:
    # As in a user's shell: no simdoc settings, and no make of ours around a `make run`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDOC_") and k not in MAKE_VARIABLES}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        HOME=str(work / "home"),
        XDG_CACHE_HOME=str(work / "cache"),
    )
    return env


@pytest.fixture
def work(tmp_path) -> Path:
    pytest.importorskip("resiliparse")  # the test extra's; crawl.warc.gz needs it
    _make_folder(tmp_path)
    return tmp_path


def run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _clone_ready() -> str | None:
    """Why commands meant for the clone cannot run here, or None."""
    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        return "the suite does not run in the clone's .venv"
    if shutil.which("make") is None:
        return "make is not installed"
    dry = subprocess.run(["make", "-n", "run"], cwd=REPO, capture_output=True, text=True)
    if "pip install" in dry.stdout:
        return "`make run` would reinstall the package into the venv this suite runs in"
    return None


# ---------------------------------------------------------------- the tests


def test_every_readme_command_runs_as_printed(work):
    env = _environment(work)
    expected_make_run = block_after("`make run` prints").text
    clone_problem = _clone_ready()
    if clone_problem:
        warnings.warn(f"the README's commands for the clone (make run, .venv/...) were not run: {clone_problem}")
    ran, outputs = [], {}
    # The report the crontab line appends to, two nights of it, for the commands that split it
    # (test_the_report_of_two_nights_splits_by_night runs them on the crontab line's own report).
    (work / "home" / "reports" / "new-duplicates.tsv").write_text(
        "a.txt\tb.txt\t1.0000\t1.0000\tboth\t2026-01-30T02:15:01Z\n"
        "c.txt\td.txt\t0.9000\t0.8800\tb\t2026-01-31T02:15:00Z\n"
    )
    for block in readme_blocks():
        if block.lang == "sh":
            commands = shell_commands(block)
        elif block.lang == "" and block.text.startswith("$ "):
            commands = [ln[2:] for ln in block.text.splitlines() if ln.startswith("$ ")]
        else:
            continue
        for command in commands:
            if not_run_reason(command):
                continue
            in_clone = command.startswith(IN_CLONE)
            if in_clone and clone_problem:
                continue
            r = run(command, REPO if in_clone else work, env)
            where = f"README line {block.line}: {command}"
            assert r.returncode == 0, f"{where}\nexit {r.returncode}\n{r.stderr}"
            assert "Traceback" not in r.stderr and "Error:" not in r.stderr, f"{where}\n{r.stderr}"
            ran.append(command)
            outputs[command] = r.stdout
        if block.lang == "" and block.text.startswith("$ "):
            _check_shown_output(block, outputs)
    assert len(ran) >= 20, ran
    if not clone_problem:
        # make echoes the recipe it runs, then simdoc prints the pairs the README shows.
        make_run = outputs["make run     # creates .venv, installs simdoc, runs: simdoc pairs sample_corpus"]
        assert make_run == ".venv/bin/simdoc pairs sample_corpus\n" + expected_make_run
    # What the recipes promise to leave behind.
    assert outputs["simdoc pairs my_corpus/                      # build or refresh the index, print pairs"] == expected_make_run
    drop = (work / "drop.txt").read_text().splitlines()
    assert len(drop) == 3 and "data.jsonl/#9999" in drop  # the copy of line 1, a soup and a policy
    pages = [json.loads(line) for line in (work / "near-duplicate-pages.jsonl").read_text().splitlines()]

    def page(name: str) -> str:
        return f"crawl.warc.gz/#http://example.org/{name}"

    assert {(p["doc_a"], p["doc_b"]) for p in pages} == {
        (page(next(iter(_texts()))), "crawl.warc.gz/#http://mirror.example.org/soup"),
        (page("misc/backup/red-lentil-soup-copy.txt"), page("misc/red-lentil-soup.txt")),
        (page("policies/remote-work-policy-2023.txt"), page("policies/remote-work-policy-2024.txt")),
    }
    soups = [work / "my_corpus" / "misc" / "backup" / "red-lentil-soup-copy.txt", work / "my_corpus" / "misc" / "red-lentil-soup.txt"]
    assert [p.exists() for p in soups].count(True) == 1  # the delete recipe removed one of the two copies
    assert "set jaccard" in outputs["simdoc show my_folder doc-a.txt doc-b.txt"]
    near_cut = outputs["simdoc pairs my_folder --threshold 0.7 --all-candidates | awk -F'\\t' '$4 < 0.75' | head"]
    assert near_cut.startswith("doc-a.txt\tdoc-b.txt\t")
    assert outputs["cut -f6 $HOME/reports/new-duplicates.tsv | uniq       # the nights that found something"] == (
        "2026-01-30T02:15:01Z\n2026-01-31T02:15:00Z\n"
    )
    assert sorted(p.name for p in (work / "home" / "reports").glob("night-*")) == ["night-2026-01-30.tsv", "night-2026-01-31.tsv"]


def _check_shown_output(block: Block, outputs: dict[str, str]) -> None:
    """A `$ command` block: the output printed under it (up to `...`) begins the real output."""
    lines = block.text.splitlines()
    command = lines[0][2:]
    shown = lines[1:]
    prefix = shown[: shown.index("...")] if "..." in shown else shown
    got = outputs[command].splitlines()
    assert got[: len(prefix)] == prefix, f"README line {block.line}: {command}"
    if "..." not in shown:
        assert got == prefix


def test_every_command_is_run_or_listed_with_a_reason():
    commands = [c for b in readme_blocks() if b.lang == "sh" for c in shell_commands(b)]
    skipped = [c for c in commands if not_run_reason(c)]
    assert 0 < len(skipped) < len(commands) / 3
    for start in NOT_RUN:  # no stale entries
        assert any(c.startswith(start) for c in commands), start
    assert not any("simdoc[" in c for c in commands), "the package index's simdoc is another project"


def test_delete_recipes_run_when_there_is_nothing_to_delete(tmp_path):
    """`xargs -0 rm --` with no input runs `rm --` and fails; the README's recipes must not."""
    env = _environment(tmp_path)
    recipes = [c for b in readme_blocks() if b.lang == "sh" for c in shell_commands(b) if "| xargs" in c and " rm " in c]
    assert len(recipes) == 2
    for recipe in recipes:
        folder = re.search(r"simdoc dedup (\S+)", recipe).group(1)
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "only.txt").write_text("One document alone has no duplicate to delete.\n")
        r = run(recipe, tmp_path, env)
        assert r.returncode == 0, f"{recipe}\n{r.stderr}"
        assert (tmp_path / folder / "only.txt").exists()


def _run_cron(command: str, work: Path) -> None:
    # cron: /bin/sh, HOME set, a short PATH without the venv.
    env = {"HOME": str(work / "home"), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(work / "cache")}
    if "PYTHONPATH" in os.environ:  # a suite run on a source tree: the cron line runs that simdoc too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    r = subprocess.run(["/bin/sh", "-c", command], cwd=work / "home", env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", (r.returncode, r.stdout, r.stderr)


def test_crontab_line_runs_twice_as_printed(work):
    command = crontab_command()
    assert "/srv/" not in command and command.startswith("$HOME/")
    reports = work / "home" / "reports"
    _run_cron(command, work)
    first = [line.rsplit("\t", 1)[0] for line in (reports / "new-duplicates.tsv").read_text().splitlines()]
    assert first == [  # every document is new on the first night (the last field: the run's time)
        "misc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\t1.0000\t1.0000\tboth",
        "policies/remote-work-policy-2023.txt\tpolicies/remote-work-policy-2024.txt\t0.8594\t0.8905\tboth",
    ]
    _run_cron(command, work)
    log = (reports / "simdoc.log").read_text()
    assert "exited" not in log and "Error" not in log, log
    assert (work / "home" / "crawl.idx" / "manifest.json").is_file()


def test_the_report_of_two_nights_splits_by_night(work):
    """--stamp ends every record with its run's time; the README's split commands, run as printed."""
    command = crontab_command()
    report = work / "home" / "reports" / "new-duplicates.tsv"
    _run_cron(command, work)
    crawl = work / "home" / "crawl"
    shutil.copy(crawl / "web" / "harbor-festival.txt", crawl / "web" / "harbor-festival-copy.txt")
    time.sleep(1.1)  # another second: another run stamp
    _run_cron(command, work)
    nights = [line.split("\t") for line in report.read_text().splitlines()]
    assert [n[:2] + n[4:5] for n in nights] == [
        ["misc/backup/red-lentil-soup-copy.txt", "misc/red-lentil-soup.txt", "both"],
        ["policies/remote-work-policy-2023.txt", "policies/remote-work-policy-2024.txt", "both"],
        ["web/harbor-festival-copy.txt", "web/harbor-festival.txt", "a"],
    ]
    stamps = [n[5] for n in nights]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s) for s in stamps)
    assert stamps[0] == stamps[1] != stamps[2]
    (block,) = [b for b in readme_blocks() if b.lang == "sh" and "cut -f6 $HOME/reports/new-duplicates.tsv" in b.text]
    env = {"HOME": str(work / "home"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(["bash", "-e", "-c", block.text], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [stamps[0], stamps[2]]
    by_night = sorted((work / "home" / "reports").glob("night-*.tsv"))
    assert len(by_night) == (1 if stamps[0][:10] == stamps[2][:10] else 2)
    assert sum(len(f.read_text().splitlines()) for f in by_night) == 3


def test_crontab_line_adds_nothing_on_a_quiet_night(work):
    command = crontab_command()
    report = work / "home" / "reports" / "new-duplicates.tsv"
    _run_cron(command, work)
    first = report.read_text()
    _run_cron(command, work)
    assert report.read_text() == first


def test_every_command_is_in_the_readme():
    import click

    from simdoc.cli import cli

    text = README.read_text(encoding="utf-8")
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):  # each command's module imported as it is asked for
        command = cli.get_command(ctx, name)
        subcommands = command.commands if isinstance(command, click.Group) else {"": None}
        for sub in subcommands:
            assert f"simdoc {name} {sub}".strip() in text, f"simdoc {name} {sub}"
