"""Skipped files are warned about once, when first seen or when they change; counted on every run.

A nightly run over a corpus with a symbolic link or a binary file in it
would otherwise fill its log with the same warnings every night. The shingle
stage records each path it passed over in the manifest (``skipped``: its
id, the reason, and its size and modification time when they could be
seen, -1 when not), published with the rest of the build by the one
manifest. The next build warns only about paths not recorded with the same
reason, size and time: new ones, and those that changed. The count in the
summary, and ``simdoc stats --skipped``, still cover every one of them; with
``--verbose`` the ones warned about before are shown too
(:attr:`simdoc.stages.results.StageResult.repeated`).

An index written before the sizes and times were recorded warns about each
skipped file once more.
"""

from __future__ import annotations


def skip_entry(doc_id: str, reason: str | None, size: int = -1, mtime_ns: int = -1) -> dict:
    """A skipped path as the manifest records it."""
    return {"id": doc_id, "reason": reason, "size": int(size), "mtime_ns": int(mtime_ns)}


def _key(entry: dict) -> tuple:
    return entry.get("id"), entry.get("reason"), entry.get("size"), entry.get("mtime_ns")


def recorded_warnings(stage: dict | None) -> list[str]:
    """The warnings of the paths a published shingle stage skipped (for ``--verbose`` when it is up to date)."""
    return [f"{s['id']}: {s['reason']}" for s in (stage or {}).get("skipped", []) if s.get("reason")]


class SkipNotes:
    """The warnings of one build, in the order they arose, and the paths it skipped.

    ``stored`` is the current shingle stage's ``skipped`` list: a path
    skipped again as it was then is not warned about again.
    """

    def __init__(self, stored: list[dict] | None) -> None:
        self.known = {_key(s) for s in stored or ()}
        self.skipped: list[dict] = []
        self._notes: list[tuple[str, bool]] = []  # (warning, given before)

    def skip(self, doc_id: str, reason: str | None, size: int = -1, mtime_ns: int = -1, warning: str | None = None) -> None:
        """Record a skipped path; ``warning`` (default: the reason) is said unless it was said before."""
        entry = skip_entry(doc_id, reason, size, mtime_ns)
        self.skipped.append(entry)
        said = warning if warning is not None else reason
        if said:
            self._notes.append((f"{doc_id}: {said}", _key(entry) in self.known))

    def warn(self, text: str) -> None:
        """A warning about a document that was read: said whenever it is read."""
        self._notes.append((text, False))

    @property
    def new(self) -> list[str]:
        """What to say on every run's stderr."""
        return [text for text, before in self._notes if not before]

    @property
    def repeated(self) -> list[str]:
        """Warnings about skipped paths that an earlier build gave already (shown with --verbose)."""
        return [text for text, before in self._notes if before]

    @property
    def every(self) -> list[str]:
        return [text for text, _ in self._notes]
