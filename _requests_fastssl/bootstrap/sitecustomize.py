"""Start-up hook of ``run``, the ``sitecustomize`` of every Python the command starts: it
activates the shim, then runs the ``sitecustomize`` it hides, once; any interpreter but CPython
3.11+ is left alone, without a word (the syntax is Python 2.7's too). It may never fail."""

import os
import sys


def _is_here(entry, here):
    # type: (str, str) -> bool
    try:
        return os.path.samefile(entry or ".", here)
    except (OSError, AttributeError):
        return False


def _run_hidden_sitecustomize(here):
    # type: (str) -> None
    path = [p for p in sys.path if not _is_here(p, here)]
    try:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec
    except ImportError:  # Python 2 (its file is closed with the interpreter's start-up)
        import imp

        try:
            found = imp.find_module("sitecustomize", path)
        except ImportError:
            return
        imp.load_module("sitecustomize", *found)  # type: ignore[arg-type]  # (replaces us)
        return
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = module_from_spec(spec)
        sys.modules["sitecustomize"] = module  # what `import sitecustomize` would have left
        spec.loader.exec_module(module)


def _ours():
    # type: () -> bool
    implementation = getattr(sys, "implementation", None)
    return getattr(implementation, "name", "") == "cpython" and sys.version_info >= (3, 11)


def _start():
    # type: () -> None
    if _ours():
        try:
            from _requests_fastssl._install import activate
        except ImportError:  # a CPython without the package: say so once, start anyway
            import logging

            logging.getLogger("requests_fastssl").warning(
                "requests_fastssl is not installed for %s; the shim is off in this process",
                sys.executable,
            )
        else:
            try:
                activate()
            except Exception:
                import logging

                logging.getLogger("requests_fastssl").exception("requests_fastssl: start-up failed")
    _run_hidden_sitecustomize(os.path.dirname(os.path.abspath(__file__)))


_start()
