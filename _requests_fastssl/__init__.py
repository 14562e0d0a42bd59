"""Implementation of requests_fastssl. Importing this package (or any module in it) installs
nothing: the pytest plugin and start-up activation import from here, and only
``import requests_fastssl`` installs the shim.

PYTEST_DONT_REWRITE: see requests_fastssl's docstring.

Modules, one job each:
  _install   install()/uninstall()/status(), the kill switch, the lazy import hook
  _wrappers  the two wrappers on requests' TLS hooks and the rules for stepping aside
  _registry  spec -> shared context: single flight, LRU bound, counters
  _contexts  building a context as urllib3 would, and freezing it
  _keys      the registry key (Spec) and file identity
  _status    the State, Status and Stats types
  _errors    the exceptions
  pytest_plugin  the pytest plugin (fixture, --fastssl, ini option)
  bootstrap/sitecustomize.py  start-up hook of `python -m requests_fastssl run`
  _cli       the command line: bench, doctor, run
  _bench     the benchmark engine (variants in child interpreters, micro, start-up)
  _server    a threaded loopback HTTPS server (benchmark and tests)
"""

from __future__ import annotations

__version__ = "0.1.0"
