"""Writes docs/benchmarks.md from tools/benchmarks.md.in: each ``<<OUT:path>>`` line becomes
the committed output at that path, verbatim, in a code block (tests/test_docs.py checks that
the page shows every committed output so). Run it after committing new runs:

    python tools/benchmarks_page.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    template = (ROOT / "tools" / "benchmarks.md.in").read_text()

    def output(match: re.Match[str]) -> str:
        return "```\n" + (ROOT / match.group(1)).read_text().strip() + "\n```"

    (ROOT / "docs" / "benchmarks.md").write_text(re.sub(r"<<OUT:([^>]+)>>", output, template))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
