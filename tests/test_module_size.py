"""The project's rule that no module grows past 450 lines (split rather than grow): checked here."""

from pathlib import Path

import simdoc

LIMIT = 450


def test_no_module_is_over_the_line_limit():
    root = Path(simdoc.__file__).parent
    over = {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py")) if (n := len(p.read_text().splitlines())) > LIMIT}
    assert over == {}
