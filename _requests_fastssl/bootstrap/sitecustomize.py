"""Start-up hook of ``python -m requests_fastssl run``; not a module to import yourself. Every
Python process the command starts imports it as ``sitecustomize`` (via PYTHONPATH): it activates
the shim, then runs the ``sitecustomize`` it hides, if any, once, so a user's own start-up code
still runs. An interpreter the shim is not for (not CPython 3.11 or later: PyPy, Python 2) is
left alone, without a word; its own ``sitecustomize`` still runs. Nothing here may break
start-up, so it is written in the syntax every Python since 2.7 reads (type comments)."""

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
    except ImportError:  # Python 2
        import imp

        try:
            found = imp.find_module("sitecustomize", path)
        except ImportError:
            return
        try:
            imp.load_module("sitecustomize", *found)  # type: ignore[arg-type]  # (replaces us)
        finally:
            if found[0] is not None:
                found[0].close()
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
