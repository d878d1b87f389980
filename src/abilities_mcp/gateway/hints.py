"""What an upstream's failure says to fix, in plain words: the usual ways a server that starts fine at a shell fails
behind the gateway, read from the tail of its stderr (a server written for the MCP Python SDK 1.x given 2.x; the
certificate and proxy variables an upstream's bare environment leaves out)."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from .config import Upstream, passed_on

# An upstream starts with the SDK's bare environment (HOME, LOGNAME, PATH, SHELL, TERM, USER) and its entry's `env`:
# these, which a machine behind a company CA or a proxy needs, never reach it by themselves.
CERTIFICATE_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
PROXY_VARIABLES = (
    *("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"),
    *("https_proxy", "http_proxy", "all_proxy", "no_proxy"),
)
# The SDK a server written for mcp 1.x needs: 2.x renamed what its decorators and imports use.
OLD_SDK = "mcp<2"

_OLD_SDK = re.compile(
    r"AttributeError: '(?:Server|FastMCP|MCPServer)' object has no attribute"
    r"|ImportError: cannot import name \S+ from '?mcp[.']"
    r"|ModuleNotFoundError: No module named '?mcp\."
)
_TLS = re.compile(
    r"certificate[ _]verify[ _]failed|invalid peer certificate|UnknownIssuer|unable to get local issuer certificate"
    r"|self[- ]signed certificate|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN",
    re.IGNORECASE,
)
_NETWORK = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|getaddrinfo|Name or service not known|name resolution"
    r"|Network is unreachable|Connection refused|error sending request|Failed to fetch|ProxyError",
    re.IGNORECASE,
)


def fix(upstream: Upstream, stderr: str, environ: Mapping[str, str] | None = None) -> str:
    """The fix a known failure in `stderr` points to, in one paragraph; "" when it shows none we know."""
    env = os.environ if environ is None else environ
    if _OLD_SDK.search(stderr):
        return _old_sdk(upstream)
    if _TLS.search(stderr):
        return _missing(upstream, CERTIFICATE_VARIABLES, env, "could not verify a TLS certificate", "SSL_CERT_FILE")
    if _NETWORK.search(stderr) and _unpassed(upstream, PROXY_VARIABLES, env):
        return _missing(upstream, PROXY_VARIABLES, env, "could not reach the network", "HTTPS_PROXY")
    return ""


def _old_sdk(upstream: Upstream) -> str:
    why = (
        f"{upstream.name!r} was written for the MCP Python SDK 1.x and was started with 2.x, which it cannot run on "
        "(the AttributeError or ImportError above)."
    )
    args = list(upstream.args)
    if Path(upstream.command or "").name == "uvx" and "--with" not in args:
        pinned = shlex.join(["uvx", "--with", OLD_SDK, *args])
        return (
            f'{why} Pin the SDK it needs: put "--with", "{OLD_SDK}" first in its `args` in gateway.json, so it '
            f"runs `{pinned}`."
        )
    return (
        f"{why} Install it with the SDK it needs: `uvx --with '{OLD_SDK}' PACKAGE ...` as its command, or "
        f"`pip install '{OLD_SDK}'` in the environment it runs from."
    )


def _missing(upstream: Upstream, names: tuple[str, ...], env: Mapping[str, str], what: str, example: str) -> str:
    """The variables this server has and the upstream does not get, and the `env` entries that pass them on."""
    unpassed = _unpassed(upstream, names, env)
    bare = (
        f"{upstream.name!r} {what}: an upstream starts with a bare environment (HOME, PATH, USER, SHELL, TERM, LOGNAME "
        "and its entry's `env`), so this server's certificate and proxy variables do not reach it."
    )
    entries = {name: passed_on(name) for name in unpassed or (example,)}
    lead = f"This server has {', '.join(unpassed)}; pass" if unpassed else "If this machine needs one, pass"
    flags = " ".join(f"--env {name}" for name in entries)
    return (
        f'{bare} {lead} them on in its entry of gateway.json: "env": {json.dumps(entries)} (each is passed when '
        f"set here and left out when not; `abilities-mcp gateway add NAME {flags} -- COMMAND ...` writes them)."
    )


def _unpassed(upstream: Upstream, names: tuple[str, ...], env: Mapping[str, str]) -> list[str]:
    return [name for name in names if env.get(name) and name not in upstream.env]
