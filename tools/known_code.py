"""The known-code table's review tool: downloads urllib3's released wheels, takes the fingerprint
of every function in ``_requests_fastssl._known.FUNCTIONS`` in each, groups the releases by
identical fingerprints, and prints each variant the table lacks with its diff against the
nearest known one. It never edits the table: a variant enters by a reviewed commit, after
``nox -s known`` ran the sharing tests on a release of it.

    python tools/known_code.py                  every urllib3 2 release: variants, new ones' diffs
    python tools/known_code.py --check          exit 1 if the newest release has code not tabled
    python tools/known_code.py --constraints    write tools/constraints.txt (the newest tabled)
    python tools/known_code.py --representatives   one release per tabled variant (for nox)
    python tools/known_code.py --layouts        write _requests_fastssl/_layouts.py: the exact
                                                text of every released block of a tabled variant

Needs pip and the package index (wheels are cached in --cache).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from importlib.util import decode_source
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _requests_fastssl._compat import version_tuple  # noqa: E402
from _requests_fastssl._known import FUNCTIONS, TABLE, _block, fingerprint, layout  # noqa: E402

CONSTRAINTS = ROOT / "tools" / "constraints.txt"
LAYOUTS = ROOT / "_requests_fastssl" / "_layouts.py"
_FILES = {
    "urllib3.connection": "urllib3/connection.py",
    "urllib3.util.ssl_": "urllib3/util/ssl_.py",
}


def releases() -> list[str]:
    """urllib3 2 releases the index serves (yanked ones are not listed)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "urllib3"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    listed = re.search(r"Available versions: (.*)", out)
    if listed is None:
        raise SystemExit(f"pip index versions urllib3 said:\n{out}")
    found = [v.strip() for v in listed.group(1).split(",")]
    return sorted((v for v in found if v.startswith("2.")), key=version_tuple)


def wheel(version: str, cache: Path) -> Path:
    found = sorted(cache.glob(f"urllib3-{version}-*.whl"))
    if not found:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "-d", str(cache), f"urllib3=={version}"],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode:
            raise SystemExit(f"pip download urllib3=={version} failed:\n{done.stderr}")
        found = sorted(cache.glob(f"urllib3-{version}-*.whl"))
    return found[0]


def _defs(path: Path) -> Iterator[tuple[str, str, str, int]]:
    """("module.function", its name, its module's source, the block's first line) in a wheel;
    first line 0 where the module defines no such function."""
    with zipfile.ZipFile(path) as archive:
        for module, name in FUNCTIONS:
            source = decode_source(archive.read(_FILES[module]))  # (as a loader reads it)
            defs = [
                node
                for node in ast.parse(source).body
                if isinstance(node, ast.FunctionDef) and node.name == name
            ]
            if not defs:
                yield f"{module}.{name}", name, source, 0
                continue
            node = defs[-1]  # (the implementation, after its @typing.overload stubs)
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield f"{module}.{name}", name, source, first


def write_layouts(wheels: list[Path]) -> int:
    """Every released block's exact text whose fingerprint is tabled: derived from the table, so
    written by this tool, not reviewed apart (a layout of a reviewed variant is that variant)."""
    found: dict[str, dict[str, tuple[int, str]]] = {f"{m}.{n}": {} for m, n in FUNCTIONS}
    for path in wheels:
        for key, name, source, first in _defs(path):
            taken = layout(source, first, name) if first else None
            if taken is not None and taken[2] in TABLE.get(key, {}):
                found[key][taken[0]] = (taken[1], taken[2])
    lines = [
        '"""Written by ``tools/known_code.py --layouts`` (do not edit): for each function of',
        "``_known.FUNCTIONS``, the digest of the exact text of every released block whose",
        "fingerprint ``_known.TABLE`` holds -> (its number of lines, that fingerprint). A block",
        'with one of these texts is identified without tokenizing; any other text is tokenized."""',
        "",
        "LAYOUTS: dict[str, dict[str, tuple[int, str]]] = {",
    ]
    for key, entries in found.items():
        lines.append(f"    {key!r}: {{")
        lines += [f"        {d!r}: {entry!r}," for d, entry in sorted(entries.items())]
        lines.append("    },")
    lines.append("}")
    LAYOUTS.write_text("\n".join(lines).replace("'", '"') + "\n")
    print(f"{LAYOUTS.relative_to(ROOT)}: {sum(map(len, found.values()))} layouts")
    return 0


def functions(path: Path) -> dict[str, tuple[str | None, str]]:
    """ "module.function" -> (fingerprint, source block) in one wheel."""
    taken: dict[str, tuple[str | None, str]] = {}
    for key, name, source, first in _defs(path):
        if not first:
            taken[key] = (None, "")
            continue
        block = _block(source, first, name)
        taken[key] = (fingerprint(source, first, name), "".join(block[1]) if block else "")
    return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "known-code")
    parser.add_argument("--check", action="store_true", help="exit 1 if the newest is not tabled")
    parser.add_argument("--constraints", action="store_true", help=f"write {CONSTRAINTS.name}")
    parser.add_argument("--representatives", action="store_true")
    parser.add_argument("--layouts", action="store_true", help=f"write {LAYOUTS.name}")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    versions = releases()
    if args.check:
        versions = versions[-1:]
    if args.layouts:
        return write_layouts([wheel(v, args.cache) for v in versions])
    seen = {v: functions(wheel(v, args.cache)) for v in versions}
    known = {v: all(fp in TABLE.get(f, {}) for f, (fp, _) in seen[v].items()) for v in versions}

    if args.check:
        (newest,) = versions
        from _requests_fastssl._layouts import LAYOUTS as written

        laid_out = all(
            taken is not None and taken[0] in written.get(key, {})
            for key, name, source, first in _defs(wheel(newest, args.cache))
            for taken in [layout(source, first, name) if first else None]
        )
        print(f"urllib3 {newest}: " + (
            "NOT tabled: stock until reviewed" if not known[newest]
            else "tabled" if laid_out
            else "tabled, but its text is not in _layouts.py (tokenized: run --layouts)"
        ))  # fmt: skip
        return 0 if known[newest] and laid_out else 1
    if args.constraints:
        newest = max((v for v in versions if known[v]), key=version_tuple)
        CONSTRAINTS.write_text(
            "# Written by tools/known_code.py --constraints: the newest urllib3 whose code the\n"
            "# known-code table holds. Test environments install with -c this file.\n"
            f"urllib3<={newest}\n"
        )
        print(f"{CONSTRAINTS.relative_to(ROOT)}: urllib3<={newest}")
        return 0

    variants: dict[tuple[str | None, ...], list[str]] = {}
    for v in versions:
        variants.setdefault(tuple(fp for fp, _ in seen[v].values()), []).append(v)
    if args.representatives:
        print(" ".join(group[-1] for group in variants.values() if known[group[0]]))
        return 0
    for f in seen[versions[0]]:
        print(f"\n{f}")
        groups: dict[str | None, list[str]] = {}
        for v in versions:
            groups.setdefault(seen[v][f][0], []).append(v)
        for fp, group in groups.items():
            span = group[0] if len(group) == 1 else f"{group[0]}-{group[-1]}"
            mark = "tabled" if fp in TABLE.get(f, {}) else "NEW"
            print(f"  {fp}  {mark:6}  {span} ({len(group)} releases)")
            if mark == "NEW":
                # the nearest tabled variant: the latest release before this group's first
                earlier = [v for v in versions if version_tuple(v) < version_tuple(group[0])]
                base = next(
                    (v for v in reversed(earlier) if seen[v][f][0] in TABLE.get(f, {})), None
                )
                if base is not None:
                    diff = difflib.unified_diff(
                        seen[base][f][1].splitlines(keepends=True),
                        seen[group[0]][f][1].splitlines(keepends=True),
                        f"{base}", f"{group[0]}",
                    )  # fmt: skip
                    sys.stdout.writelines("    " + line for line in diff)
    print(f"\n{len(variants)} variants over {len(versions)} releases "
          f"({sum(known.values())} releases wholly tabled)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
