"""HTML pages: which files are pages (by name), the charset a page names, and its visible text.

The text of a page is what resiliparse's extractor gives (scripts, styles and tags
dropped; with ``main_content``, navigation, menus and footers too). resiliparse is
the ``web`` extra: a corpus with a page and no resiliparse says what to install.

A page is read as UTF-8 unless its bytes are not UTF-8 and a ``<meta>`` among
its first 1024 bytes names another charset (``<meta charset="windows-1251">``, or
``http-equiv`` with ``content="text/html; charset=..."``): then in that one, as
a browser does (:func:`declared`). A page that is UTF-8 is read so whatever it
names: a page saved again in UTF-8 often keeps the ``<meta>`` of its old charset.
As WHATWG's encoding standard has it, ``iso-8859-1`` and ``us-ascii`` mean
windows-1252 and ``gb2312`` GBK; a ``<meta>`` naming UTF-16 or a charset Python
does not know is passed over.
"""

from __future__ import annotations

import codecs
import re

from simdoc.corpus.encodings import NOT_UTF8, UNDECODABLE, kept_decode
from simdoc.corpus.files import ReadResult, status_of, uncompressed_name

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
# Not `pip install 'simdoc[web]'`: the package index's "simdoc" is another project.
WEB_EXTRA = "resiliparse: pip install resiliparse (or, in simdoc's source folder, pip install '.[web]')"


def is_html(path: str) -> bool:
    """An HTML page by its name (``.html``, ``.htm``, ``.xhtml``, in any case, possibly compressed)."""
    return uncompressed_name(path).endswith(HTML_SUFFIXES)


def html_to_text(html: str, main_content: bool = False) -> str:
    """Visible text of an HTML page, by resiliparse's extractor (scripts, styles and tags dropped);
    with ``main_content``, only the page's main text (navigation, menus, footers dropped too).

    Raises
    ------
    ImportError
        resiliparse is not installed (the ``web`` extra).
    """
    from resiliparse.extract.html2text import extract_plain_text

    try:  # (no scan for surrogates first: a few ms a MB, on every page)
        return extract_plain_text(html, main_content=main_content)
    except TypeError:  # resiliparse takes no lone surrogate ("neither string nor HTMLTree")
        if not _SURROGATE.search(html):
            raise
    # A lone surrogate is how a byte that is not UTF-8 is kept (encodings.UNDECODABLE): each goes
    # through as a private-use character of plane 16, and back.
    return extract_plain_text(html.translate(_AS_PRIVATE), main_content=main_content).translate(_AS_SURROGATE)


_SURROGATE = re.compile("[\ud800-\udfff]")
_AS_PRIVATE = {s: s - 0xD800 + 0x10F800 for s in range(0xD800, 0xE000)}
_AS_SURROGATE = {p: s for s, p in _AS_PRIVATE.items()}


_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:+-]+)", re.IGNORECASE)
_WHATWG = {"iso8859-1": "cp1252", "ascii": "cp1252", "gb2312": "gbk"}  # what a browser reads these labels as


def meta_charset(page: bytes) -> str | None:
    """The charset a ``<meta>`` among the first 1024 bytes of ``page`` names, as Python's codec
    name; None for none, for UTF-8, UTF-16 or UTF-32 (a page's bytes say those themselves), and
    for a name Python does not know."""
    m = _META_CHARSET.search(page, 0, 1024)
    if m is None:
        return None
    try:
        name = codecs.lookup(m.group(1).decode("ascii")).name
    except LookupError:
        return None
    if name.startswith(("utf-8", "utf-16", "utf-32")):
        return None
    try:
        b"a".decode(name)  # LookupError for a codec that is not a text encoding (base64; not for b"")
    except (LookupError, ValueError):
        return None
    return _WHATWG.get(name, name)


def declared(text: str) -> tuple[str, str, bool] | None:
    """A page read as UTF-8 (``text``, its bytes that are not UTF-8 kept as themselves) read
    again in the charset its ``<meta>`` names: (charset, text, whether every byte was valid in
    it; those that are not are kept as themselves). None where UTF-8 stands: the page is UTF-8,
    or names no other charset Python knows."""
    if text.isascii() or not _SURROGATE.search(text):
        return None
    try:
        raw = text.encode("utf-8", UNDECODABLE)  # the bytes read, as they were
    except UnicodeEncodeError:  # not a text read from bytes (none is)
        return None
    charset = meta_charset(raw)
    if charset is None:
        return None
    try:
        text, bad = kept_decode(raw, charset)
    except UnicodeDecodeError:  # an ASCII byte the charset refuses (ISO-2022): UTF-8 stands
        return None
    return charset, text, bad is None


def in_declared_charset(res: ReadResult) -> None:
    """A page as :func:`simdoc.corpus.files.read_document` read it (``res``), read again in the
    charset its ``<meta>`` names where :func:`declared` says so: its text, warning and status.
    Only a page read with bytes that are not UTF-8 (status ``replaced``) is looked at."""
    got = declared(res.text) if res.status == "replaced" and isinstance(res.text, str) else None
    if got is None:
        return
    charset, res.text, clean = got
    said = [w for w in (res.warning or "").split("; ") if w and not w.startswith("invalid UTF-8 at byte")]
    if not clean:
        said.append(f"bytes invalid in {charset}, the charset its <meta> names ({NOT_UTF8})")
    res.warning = "; ".join(said) or None
    res.status = status_of(said) if clean else "replaced"
