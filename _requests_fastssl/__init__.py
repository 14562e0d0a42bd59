"""Implementation of requests_fastssl. Importing this package (or any module in it) installs
nothing: the pytest plugin and start-up activation import from here, and only
``import requests_fastssl`` installs the shim.

PYTEST_DONT_REWRITE: see requests_fastssl's docstring.

Modules, one job each (docs/design.md says how they fit together):
  _state         the install state and its lock; imports nothing
  _install       install() / uninstall() / status() / stats() / clear(), the kill switch
  _import_hook   the meta-path entry that calls back when requests.adapters is imported
  _compat        which requests/urllib3 can be patched; the facts read at patch time,
                 among them urllib3's settings, derived from its own code
  _wrappers      the cert_verify wrapper: attach or take back a shared context, step aside
  _owned         adapter-owned contexts: a CA file loaded once per identity, not per
                 connection (the wrapper on urllib3.connection.ssl_wrap_socket)
  _warm          warm() and REQUESTS_FASTSSL_WARM: the load at start-up
  _contexts      building a context as urllib3 would; the frozen class's per-connection checks
  _keys          the registry key (Spec) and the file checks (identity and contents)
  _registry      key -> shared context: single flight, LRU bound, counters, fork handling
  _status        the State, Status and Stats types
  _errors        the exceptions
  pytest_plugin  the pytest plugin (fixture, --fastssl, ini option)
  bootstrap/sitecustomize.py  start-up hook of `python -m requests_fastssl run`
  cli/           the command line (bench, doctor, run); not part of the shim:
    __init__     argparse, run, doctor
    bench        the benchmark engine (variants in child interpreters, micro, start-up)
    server       a threaded loopback HTTPS server (benchmark and tests)
"""

from __future__ import annotations

__version__ = "0.1.0"
