"""The docs as a reader follows them: every relative link in README.md and docs/ leads to a
file that exists, and every #anchor to a heading in it (as a code host renders them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: no heading for #{anchor}"


def test_the_design_docs_reason_table_is_the_policys() -> None:
    """docs/design.md's step-aside table lists exactly the Reason codes, with their text."""
    from _requests_fastssl._policy import Reason

    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## Step-aside rules", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9.\-]+)` \| (.+) \|$", section, re.M)
    assert rows == [(reason.code, reason.text) for reason in Reason]


def _measured(version: str) -> dict[str, str]:
    text = (ROOT / "benchmarks" / f"openssl-{version}" / "results.txt").read_text()
    load = re.search(r"^one CA load: (\d+\.\d) ms", text, re.M)
    startup = re.search(r"^start-up cost of .*?: ([+-]\d+\.\d) ms", text, re.M)
    assert load is not None, version
    assert startup is not None, version
    return {"load": load.group(1), "startup": startup.group(1)}


def test_the_readmes_figures_are_the_committed_runs() -> None:
    """Figures the README quotes come from the committed results files, so they cannot drift
    from what was measured (issue 28): the price of one load, in the first paragraph and the
    table, and the start-up cost, on both OpenSSL lines."""
    readme = (ROOT / "README.md").read_text()
    old, new = _measured("3.0"), _measured("3.6")
    first = readme.split("\n\n")[1]
    assert f"**every new connection**: {old['load']} ms for certifi's bundle" in first
    assert (
        f"| one CA load, what stock pays per new connection | {old['load']} ms | {new['load']} ms |"
        in readme
    )
    assert (
        f"| start-up cost of the activation line | {old['startup']} ms | {new['startup']} ms |"
        in readme
    )
    assert f"certifi's bundle {old['load']} ms" in readme
