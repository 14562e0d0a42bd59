"""Implementation of requests_fastssl. Importing this package (or any module in it) installs
nothing: the pytest plugin and start-up activation import from here, and only
``import requests_fastssl`` installs the shim.

PYTEST_DONT_REWRITE: see requests_fastssl's docstring.

Modules, one job each (docs/design.md says how they fit together):
  _state         the install state and its lock; imports nothing
  _install       install() / uninstall() / status() / stats() / clear(), the kill switch
  _import_hook   the meta-path entry that calls back when urllib3 (or requests.adapters) is imported
  _compat        which urllib3 can be patched, and the one function wrapped
  _hook          the point of use: the wrapper on urllib3's TLS set-up
  _policy        every step-aside rule and the Reason enum; the registry key
  _genuine       what counts as urllib3's and ssl's own code, judged by where it comes from
  _contexts      building a context as urllib3 would, and the frozen class
  _files         what a context read from each file, checked at every new connection
  _registry      key -> shared context: single flight with bounded waits, LRU, counters, fork
  _warm          warm() and REQUESTS_FASTSSL_WARM: the load at start-up
  _status        the State, Status and Stats types
  _errors        the exceptions
  pytest_plugin  the pytest plugin (fixture, marker, --fastssl, ini option)
  bootstrap/sitecustomize.py  start-up hook of `python -m requests_fastssl run`
  cli/           the command line (bench, doctor, run); not part of the shim
"""

from __future__ import annotations

__version__ = "0.1.0"
