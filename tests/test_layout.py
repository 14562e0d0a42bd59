"""The implementation stays small enough to read (issues 19 and 26): the core (the shim and its
activation: every module of the package and the run bootstrap, but the command line and the
pytest plugin, which are interfaces to it) under 3,050 lines (2,200 until issue 39 added the
known-code table and its checks, the import entry's legacy finders and loaders, and the
wrapping of a signal handler's error in a CA load; 2,700 until issue 41's counters told loads
saved in callers' own contexts apart; 2,750 until issue 42's green libraries: their context
classes' known code, 35 lines of it table, and a greenlet's wait; 3,000 until issue 43's
httpx counters, status line and table entries), no module of the package
over 300, and no import cycle anywhere. ``_layouts.py`` is data a tool writes, not code to
read: not counted."""

from __future__ import annotations

import ast

from support import ROOT

PACKAGE = ROOT / "_requests_fastssl"


def test_the_core_is_small() -> None:
    sizes = {
        path.name: len(path.read_text().splitlines())
        for path in [*PACKAGE.glob("*.py"), *PACKAGE.glob("bootstrap/*.py")]
    }
    plugin = sizes.pop("pytest_plugin.py")
    sizes.pop("_layouts.py")
    # httpx's transports (issue 43): a second client library, budgeted on its own (500 until
    # anyio's TLS wrap, whose one run_sync call a frozen context must not take: _httpx_anyio;
    # 620 until its import was followed by a module of its own, keeping _install under 300)
    httpx = sum(sizes.pop(name) for name in list(sizes) if name.startswith("_httpx"))
    assert httpx < 700, httpx
    assert sum(sizes.values()) < 3050, sizes
    assert max(*sizes.values(), plugin) <= 300, sizes
    cli = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("cli/*.py")}
    assert max(cli.values()) <= 300, cli


def _import_graph() -> dict[str, set[str]]:
    """Every module of both packages (the command line and the public package included) ->
    the modules of ours it imports, anywhere in it: at the top, lazily in a function, by
    ``__import__`` or ``importlib.import_module`` with a constant name. Importing a module
    imports the packages it sits in first: those are dependencies too (but for the importer's
    own packages, which are being imported already)."""
    files = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for top in ("requests_fastssl", "_requests_fastssl")
        for path in (ROOT / top).rglob("*.py")
    }
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if name in packages else name.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                named |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                named |= {alias.name for alias in node.names}
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", ""))
                in (
                    "__import__",
                    "import_module",
                )
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                named.add(str(node.args[0].value))
        deps = set()
        for target in named:
            while target:  # a module, and the packages it sits in but for this one's own
                if target in files and target != name and not name.startswith(f"{target}."):
                    deps.add(target)
                target = target.rpartition(".")[0]
        graph[name] = deps
    return graph


def test_no_import_cycle() -> None:
    graph = _import_graph()
    assert "_requests_fastssl._install" in graph["requests_fastssl"]  # (the graph sees imports)
    assert "_requests_fastssl.cli.main" in graph["_requests_fastssl.cli"]

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


def test_the_core_never_imports_the_command_line_or_the_public_package() -> None:
    graph = _import_graph()
    core = [n for n in graph if n.startswith("_requests_fastssl") and ".cli" not in n]
    outside = {n for n in graph if ".cli" in n or n == "requests_fastssl"}
    assert {name: graph[name] & outside for name in core if graph[name] & outside} == {}
