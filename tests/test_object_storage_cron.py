"""The README's crontab line for a bucket runs as printed (issue 31), against moto's S3 server.

As cron runs it: /bin/sh, HOME set, a short PATH; the credentials and the
endpoint in the environment cron gives the job (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL), as the README says. Two nights:
the first reports the pairs the folder's line reports, the second only the
copy made since.
"""

from __future__ import annotations

import os
import subprocess
import time

from tests.conftest import SAMPLE_CORPUS
from tests.test_object_storage import KEYS, server  # noqa: F401  (fixture)
from tests.test_readme import crontab_commands, work  # noqa: F401  (work: a fixture)


def _night(command: str, work, endpoint: str) -> None:
    env = {"HOME": str(work / "home"), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(work / "cache"), **KEYS}
    env["AWS_ENDPOINT_URL"] = endpoint
    if "PYTHONPATH" in os.environ:  # a suite run on a source tree: the cron line runs that simdoc too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    r = subprocess.run(["/bin/sh", "-c", command], cwd=work / "home", env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", (r.returncode, r.stdout, r.stderr)


def test_the_buckets_crontab_line_runs_two_nights_as_printed(server, work):
    import s3fs

    endpoint, _ = server
    (_, command) = crontab_commands()
    assert "s3://my-bucket/crawl/" in command
    fs = s3fs.S3FileSystem(key=KEYS["AWS_ACCESS_KEY_ID"], secret=KEYS["AWS_SECRET_ACCESS_KEY"], endpoint_url=endpoint, skip_instance_cache=True)
    if fs.exists("my-bucket"):
        fs.rm("my-bucket", recursive=True)
    fs.mkdir("my-bucket")
    for p in sorted(SAMPLE_CORPUS.rglob("*.txt")):
        fs.pipe(f"my-bucket/crawl/{p.relative_to(SAMPLE_CORPUS).as_posix()}", p.read_bytes())
    report = work / "home" / "reports" / "new-duplicates.tsv"
    _night(command, work, endpoint)
    assert [line.rsplit("\t", 1)[0] for line in report.read_text().splitlines()] == [  # as the folder's first night
        "misc/backup/red-lentil-soup-copy.txt\tmisc/red-lentil-soup.txt\t1.0000\t1.0000\tboth",
        "policies/remote-work-policy-2023.txt\tpolicies/remote-work-policy-2024.txt\t0.8594\t0.8905\tboth",
    ]
    fs.pipe("my-bucket/crawl/web/harbor-festival-copy.txt", (SAMPLE_CORPUS / "web" / "harbor-festival.txt").read_bytes())
    time.sleep(1.1)  # another second: another run stamp
    _night(command, work, endpoint)
    nights = [line.split("\t") for line in report.read_text().splitlines()]
    assert nights[2][:2] + nights[2][4:5] == ["web/harbor-festival-copy.txt", "web/harbor-festival.txt", "a"]
    assert len(nights) == 3 and nights[0][5] == nights[1][5] != nights[2][5]
    log = (work / "home" / "reports" / "simdoc.log").read_text()
    assert "exited" not in log and "Error" not in log, log
    fs.rm("my-bucket", recursive=True)
