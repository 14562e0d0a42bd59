"""Start-up hook of ``python -m requests_fastssl run``; not a module to import yourself. Every
Python process the command starts imports it as ``sitecustomize`` (via PYTHONPATH): it activates
the shim, then runs the ``sitecustomize`` it hides, if any, so a user's own start-up code still
runs. Nothing here may break start-up: failures are logged and swallowed."""

import os
import sys


def _run_hidden_sitecustomize(here: str) -> None:
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    def is_here(entry: str) -> bool:
        try:
            return os.path.samefile(entry or ".", here)
        except OSError:
            return False

    spec = PathFinder.find_spec("sitecustomize", [p for p in sys.path if not is_here(p)])
    if spec is not None and spec.loader is not None:
        module = module_from_spec(spec)
        sys.modules["sitecustomize"] = module  # what `import sitecustomize` would have left
        spec.loader.exec_module(module)


def _start() -> None:
    try:
        from _requests_fastssl._install import activate
    except ImportError:  # an interpreter without the package: say so once, start anyway
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
