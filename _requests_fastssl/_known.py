"""The library code the shim knows: for each function whose steps it mirrors or whose inputs its
key assumes, the fingerprints of the variants reviewed (entered by hand, from what
``tools/known_code.py`` prints), and how a function's fingerprint is taken from its source
tokens. Stock for anything else: a local patch, a release not reviewed, a sourceless install."""

from __future__ import annotations

import hashlib
import io
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs start-up time; this module is imported at activation)
    from collections.abc import Iterable, Iterator
    from typing import Any

__all__ = ["FUNCTIONS", "TABLE", "fingerprint", "identify", "layout", "source_of"]

# The functions the shim rewrites inputs over (urllib3's set-up), reproduces the steps of
# (the build), or whose inputs its key assumes. Code that runs after the context, in stock
# and shim alike (_match_hostname, the socket wrap), needs no entry.
FUNCTIONS = (
    ("urllib3.connection", "_ssl_wrap_socket_and_match_hostname"),
    ("urllib3.util.ssl_", "ssl_wrap_socket"),
    ("urllib3.util.ssl_", "create_urllib3_context"),
    ("urllib3.util.ssl_", "resolve_cert_reqs"),
    ("urllib3.util.ssl_", "resolve_ssl_version"),
    ("urllib3.util.ssl_", "_is_key_file_encrypted"),
)

# "module.function" -> {fingerprint: the releases whose wheel holds that variant}. Reviewed:
# a variant enters only by a commit that read its diff (tools/known_code.py prints it) after
# the sharing tests passed on a release of it (nox -s known).
# 2.0.2 is not: its set-up keeps OpenSSL's host-name check for assert_hostname=False, where the
# build (from 2.0.3 on) turns it off. 2.0.0 and 2.0.1 were yanked.
TABLE: dict[str, dict[str, str]] = {
    "urllib3.connection._ssl_wrap_socket_and_match_hostname": {
        "a011a76a28dbbd2629665889e0ca2d76": "2.0.3-2.2.1",
        "6382e6f4465e27521b79268d6c24be1b": "2.2.2-2.8.0",
    },
    "urllib3.util.ssl_.ssl_wrap_socket": {
        "567de20dfe988f5fcac070db88c2a525": "2.0.3-2.0.6",
        "89ac59860d244d40c6556a837ec38574": "2.0.7-2.2.2",
        "470237a75e51b437d887d7f6bb02b96f": "2.2.3-2.8.0",
    },
    "urllib3.util.ssl_.create_urllib3_context": {
        "1cacd3c9345fb6addf54fea70412f68c": "2.0.3-2.0.7",
        "dca23e72c757bd94dfef3dc537798671": "2.1.0",
        "c4b68b77e8c7ffa49654de386dcd25a5": "2.2.0-2.2.3",
        "5f95d31dd7101b20759008b42bd2e15f": "2.3.0",
        "b065537b595d642c9cf14a3ddf3fd80c": "2.4.0",
        "29af9a8e48f4c95492d4f57773936c26": "2.5.0",
        "2eaaf407fff803875c0fe2aac1fee88e": "2.6.0-2.6.3",
        "7f22de8d1d84b6c8ef70116cb3d12421": "2.7.0-2.8.0",
    },
    "urllib3.util.ssl_.resolve_cert_reqs": {"f4f285a170768eaa74dd5f7e6cc5f8b3": "2.0.3-2.8.0"},
    "urllib3.util.ssl_.resolve_ssl_version": {"ffe08514b0f237db2421c84537c0dd4a": "2.0.3-2.8.0"},
    "urllib3.util.ssl_._is_key_file_encrypted": {"0e14f5ef6b06c62d2f92cceba73ffaa1": "2.0.3-2.8.0"},
    # Green libraries' SSLContext overrides (_genuine.GREEN), "module.Class.name"; a property's
    # getter and setter share the name. Under any other release or a local patch: stock.
    "gevent.ssl.SSLContext.wrap_socket": {"87fb563afbcfc29b27ff7cc36feee698": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext.options": {"cd431ebc86c45d16090e2d5a2783c338": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext.verify_flags": {"144cf003f64604098abbfc066900762b": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext.verify_mode": {"f583606b753bf132997c9edadbf68ae7": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext.minimum_version": {"ad4ce6db8bc8e0e6a24bfc52f06e56f1": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext.maximum_version": {"8dbb0173155b67f70578348fa376674e": "24.2.1-26.9.0"},
    "gevent.ssl.SSLContext._msg_callback": {
        "7adee1c6a7b1816af0c0e8fe58cc11a6": "24.2.1-26.9.0",  # (the getter)
        "aa5c196c2b1d412847133efa52a24e11": "24.2.1-26.9.0",
    },
    "gevent.ssl.SSLContext.sni_callback": {
        "d396f6453f9f80b945bd2fd4789491f6": "24.2.1-26.9.0",  # (the getter)
        "7bd5d51eb199e05b36d306a33d033483": "24.2.1-26.9.0",
    },
    "eventlet.green.ssl.GreenSSLContext.wrap_socket": {
        "34f3d2a1418a312da6147e6f9ae8b646": "0.36.1-0.41.3"
    },
    "eventlet.green.ssl.GreenSSLContext.options": {
        "69a2f8ad4da2622a4dd8ca468640c99b": "0.36.1-0.41.3"
    },
    "eventlet.green.ssl.GreenSSLContext.verify_flags": {
        "7dda1a7e731c7d2740f69c2cbe047965": "0.36.1-0.41.3"
    },
    "eventlet.green.ssl.GreenSSLContext.verify_mode": {
        "d15270e6f39f3d69eb5c524e21d38503": "0.36.1-0.41.3"
    },
    "eventlet.green.ssl.GreenSSLContext.maximum_version": {
        "7a89e57782a162a3fa9d1035cda1f11c": "0.36.1-0.41.3"
    },
    "eventlet.green.ssl.GreenSSLContext.minimum_version": {
        "227e12d146067ea8ee635b49728730d0": "0.36.1-0.41.3"
    },
    # httpx (_httpx.FUNCTIONS): keys by qualified name, fingerprints of the block dedented
    # (_httpx._fingerprint). 0.27 builds through SSLConfig: not tabled, stock.
    "httpx._config.create_ssl_context": {"1c99a0f2e58e1cd056856072b8a87da8": "httpx 0.28.1"},
    "httpx._transports.default.HTTPTransport.__init__": {
        "7efd93cd22ed4f0ceb2fce3faa470882": "httpx 0.28.1",
    },
    "httpx._transports.default.AsyncHTTPTransport.__init__": {
        "ff5979a552fdd6ec3385116a5f98a8db": "httpx 0.28.1",
    },
    "httpcore._sync.connection.HTTPConnection._connect": {
        "431016d2643b9d0b344f9937b2ec123e": "httpcore 1.0.9",
    },
    "httpcore._async.connection.AsyncHTTPConnection._connect": {
        "1ec18a43e4513f6e3a7a25fac70d488e": "httpcore 1.0.9",
    },
    "httpcore._sync.http_proxy.TunnelHTTPConnection.handle_request": {
        "a59460b5b2698894aa7c9bc339b8cb27": "httpcore 1.0.9",
    },
    "httpcore._async.http_proxy.AsyncTunnelHTTPConnection.handle_async_request": {
        "40c23c9cb5b85bded681650611df958e": "httpcore 1.0.9",
    },
    # anyio's TLSStream.wrap (_httpx_anyio): its run_sync call for a context not exactly ssl's.
    "anyio.streams.tls.TLSStream.wrap": {"7bf9a88085c2fcaf8959b10185140752": "anyio 4.16.0"},
}


def _tokens(lines: list[str], end: list[int]) -> Iterator[str]:
    """The block that starts at ``lines[0]`` (a def, or its first decorator), token by token:
    comments and blank lines left out, f-strings (3.12 splits them) joined again into the one
    STRING token 3.11 gives, so that a fingerprint is the same on every Python. ``end[0]``: the
    number of lines the block spans, once it has ended."""
    import tokenize  # (not at start-up: only a first check of the code needs it)

    skip, structure = (
        {tokenize.COMMENT, tokenize.NL},
        {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT},
    )
    starts = {
        getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)
    }
    ends = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}
    readline = io.StringIO("".join(lines)).readline
    depth, body, nested, start = 0, False, 0, (0, 0)
    for tok in tokenize.generate_tokens(readline):
        kind = tok.type
        if kind in starts:
            nested, start = nested + 1, (start if nested else tok.start)
            continue
        if nested:
            if kind in ends:
                nested -= 1
                if not nested:  # (the f-string's own text, as 3.11's single STRING token)
                    (r0, c0), (r1, c1) = start, tok.end
                    text = "".join(lines[r0 - 1 : r1])
                    yield f"STRING {text[c0 : len(text) - len(lines[r1 - 1]) + c1]}"
            continue
        if kind in skip:
            continue
        if kind == tokenize.INDENT:
            depth, body = depth + 1, True
        elif kind == tokenize.DEDENT:
            depth -= 1
        elif kind == tokenize.ENDMARKER:
            return
        yield (
            tokenize.tok_name[kind]
            if kind in structure
            else f"{tokenize.tok_name[kind]} {tok.string}"
        )
        if body and depth == 0:
            end[0] = tok.start[0] - 1 if kind == tokenize.DEDENT else tok.end[0]
            return


def _dedented(lines: list[str]) -> list[str]:
    """A method's lines (a green library's class: ``_genuine.GREEN``) as if at the module's
    level, so that its tokens are those of a function's block; the lines up to the first one
    outside its indentation (the block has ended by then; else tokenizing fails: stock)."""
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip(" \t"))] if lines else ""
    if not indent:
        return lines
    out = []
    for line in lines:
        if line.startswith(indent):
            out.append(line[len(indent) :])
        elif line.strip():
            break
        else:
            out.append("\n")
    return out


def _block(source: str, first_line: int, name: str) -> tuple[str, list[str]] | None:
    """The fingerprint of function ``name`` defined at ``first_line`` (1-based: its first
    decorator's line, as ``co_firstlineno``) of ``source``, and the block's lines."""
    import tokenize

    # (line ends as the compiler counts them: not str.splitlines, which also splits at \f)
    lines = io.StringIO(source).readlines()[first_line - 1 :]
    end = [0]
    try:
        tokens = list(_tokens(_dedented(lines), end))
    except (SyntaxError, tokenize.TokenError):  # (cut short: not a block this can read)
        return None
    try:
        if tokens[tokens.index("NAME def") + 1] != f"NAME {name}":
            return None
    except (ValueError, IndexError):
        return None
    return hashlib.sha256("\n".join(tokens).encode()).hexdigest()[:32], lines[: end[0]]


def _laid_out(
    source: str, code: types.CodeType, namespace: dict[str, Any]
) -> tuple[str, list[str]] | None:
    """The fingerprint of a block whose lines from the first are, byte for byte, a released
    one of a tabled variant (``_layouts``), and those lines: no tokenizing (ms on 3.11). The
    caller compiles them and compares with the live code, as for tokens. None: the tokens
    decide."""
    from ._layouts import LAYOUTS

    layouts = LAYOUTS.get(f"{namespace.get('__name__')}.{code.co_qualname}", {})
    lines = io.StringIO(source).readlines()[code.co_firstlineno - 1 :]
    for count in sorted({count for count, _ in layouts.values()}):
        block = lines[:count]
        found = layouts.get(hashlib.sha256("".join(block).encode()).hexdigest()[:32])
        if found is not None and found[0] == count:
            return found[1], block
    return None


def layout(source: str, first_line: int, name: str) -> tuple[str, int, str] | None:
    """For ``tools/known_code.py``: the digest of the block's exact text, its number of lines
    and its fingerprint, as ``_laid_out`` looks them up."""
    found = _block(source, first_line, name)
    if found is None:
        return None
    text = "".join(found[1])
    return hashlib.sha256(text.encode()).hexdigest()[:32], len(found[1]), found[0]


def fingerprint(source: str, first_line: int, name: str) -> str | None:
    """The fingerprint of function ``name`` defined at ``first_line`` of ``source``, or None
    if no such def starts there."""
    found = _block(source, first_line, name)
    return None if found is None else found[0]


def identify(
    source: str, code: types.CodeType, namespace: dict[str, Any], also: Iterable[str] = ()
) -> str | None:
    """The fingerprint of the function whose code is ``code``, taken from ``source`` only if
    that source is what ``code`` was compiled from: its block alone, compiled at its lines with
    the code's future flags and this interpreter's optimisation, gives an equal code object (a
    stale or unchecked ``.pyc``, or a loader that rewrites code but not source, fails it). The
    names it reads that hold modules (``namespace``: its globals), and those in ``also`` (a
    module's imports that bind nothing: under ``TYPE_CHECKING``), are declared imported on the
    first line, as the module's own imports declare them: the compiler calls an imported
    name's attributes differently. A guess that misses only ever fails the check: stock."""
    found = _laid_out(source, code, namespace) or _block(source, code.co_firstlineno, code.co_name)
    if found is None or code.co_firstlineno < 2:
        return None
    import __future__

    names: set[str] = set()
    todo = [code]
    while todo:
        names.update(todo[-1].co_names)
        todo += [c for c in todo.pop().co_consts if isinstance(c, types.CodeType)]
    imported = sorted(
        n for n in names if n in also or isinstance(namespace.get(n), types.ModuleType)
    )
    text = "".join(
        (f"import {', '.join(imported)}" if imported else "", "\n" * (code.co_firstlineno - 1))
    )
    owner = code.co_qualname.rpartition(".")[0]
    if owner:  # a method: compiled in a class of its class's name (its __class__ cell, its
        # qualified name), under an `if` that takes any indentation; only a plain class's
        if not owner.isidentifier() or code.co_firstlineno < 4 or not found[1][0][:2].isspace():
            return None
        text = text[:-2] + f"class {owner}:\n if 1:\n"
    futures = sum(getattr(__future__, n).compiler_flag for n in __future__.all_feature_names)
    try:
        compiled = compile(text + "".join(found[1]), code.co_filename, "exec",
                           flags=code.co_flags & futures, dont_inherit=True,
                           optimize=sys.flags.optimize)  # fmt: skip
    except (SyntaxError, ValueError):
        return None
    consts = [c for c in compiled.co_consts if isinstance(c, types.CodeType)]
    if owner:  # (the class body's code holds the method's)
        consts = [c for body in consts for c in body.co_consts if isinstance(c, types.CodeType)]
    if not any(const == code for const in consts):
        return None
    return found[0]


def source_of(module_name: str) -> str | None:
    """The source text of an imported module, through its loader (None: sourceless, frozen)."""
    module = sys.modules.get(module_name)
    try:
        source = module.__spec__.loader.get_source(module_name)  # type: ignore[union-attr]
    except (AttributeError, ImportError, OSError):
        return None
    return source if isinstance(source, str) else None
