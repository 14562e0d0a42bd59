"""The implementation stays small enough to read (issue 19): under 2,200 lines without the
command line, no module over 300, and no import cycle between its modules."""

from __future__ import annotations

import ast

from support import ROOT

PACKAGE = ROOT / "_requests_fastssl"


def _modules() -> dict[str, ast.Module]:
    files = [*PACKAGE.glob("*.py"), *PACKAGE.glob("bootstrap/*.py")]
    return {path.stem: ast.parse(path.read_text()) for path in files}


def test_the_core_is_small() -> None:
    sizes = {
        path.name: len(path.read_text().splitlines())
        for path in [*PACKAGE.glob("*.py"), *PACKAGE.glob("bootstrap/*.py")]
    }
    assert sum(sizes.values()) < 2200, sizes
    assert max(sizes.values()) <= 300, sizes


def test_no_import_cycle() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, tree in modules.items():
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[name] = deps & set(modules)

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph[name])
        return seen

    assert [name for name in graph if name in reach(name)] == []
