"""One consistent set of classes per connection: urllib3's SSLContext, ssl.SSLContext and
ssl.SSLSocket must all be the standard library's own. Rebound after urllib3's import (a subclass,
gevent patched late, as gunicorn's --preload with gevent workers does), stock's set-up fails on
every new connection (ssl.py's setters look the names up when they run); so must the shim's,
a context cached before the rebinding included."""

from __future__ import annotations

import json

import pytest
from support import PKI, ServerFactory, run_python

# (urllib3 1.26 is left stock altogether: nothing here applies to it)
pytestmark = [pytest.mark.subprocess, pytest.mark.urllib3_2]

PROGRAM = """
import json, os, ssl
if os.environ["MODE"] == "shim":
    import requests_fastssl
import requests

def get():
    try:
        r = requests.get(os.environ["URL"], verify=os.environ["CA"],
                         headers={"Connection": "close"})
        return [str(r.status_code)]
    except BaseException as exc:
        return [type(exc).__qualname__, str(exc)[:200]]

out = [get()]  # (a context cached, in the shim)
name = os.environ["NAME"]
original = getattr(ssl, name)
setattr(ssl, name, type(name, (original,), {}))
out += [get(), get()]
setattr(ssl, name, original)
out.append(get())
print(json.dumps(out))
if os.environ["MODE"] == "shim":
    print(json.dumps(requests_fastssl.stats().step_aside_reasons))
"""


@pytest.mark.parametrize("name", ["SSLContext", "SSLSocket"])
def test_a_class_rebound_after_urllib3_was_imported_is_stock(
    name: str, pki: PKI, make_server: ServerFactory
) -> None:
    env = {"URL": make_server().url, "CA": pki.bundle, "NAME": name}
    stock = [
        json.loads(x) for x in run_python(PROGRAM, env={**env, "MODE": "stock"}).split("\n") if x
    ]
    shim = [
        json.loads(x) for x in run_python(PROGRAM, env={**env, "MODE": "shim"}).split("\n") if x
    ]
    assert stock[0][0] == ["200"]
    assert stock[0][3] == ["200"]  # (restored: new connections work again)
    assert stock[0][1][0] != "200"  # (stock's own failure, whatever this Python makes of it)
    assert shim[0] == stock[0]
    assert shim[1] == {"context-class": 2}
