"""gateway.json: the upstream MCP servers the gateway proxies, in the `mcpServers` shape of `.mcp.json`.

Pydantic models are the schema (`abilities-mcp schema gateway`) and the checker (`abilities-mcp validate`). A missing
file means no upstreams; a broken entry is left out with a diagnostic naming the field and the fix, never a crash.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, ValidationError

from ..abilities.catalog import FileDiagnostics
from ..durations import parse_duration
from ..errors import Diagnostic
from ..explain import Format, explain
from ..files import Unreadable, decode_text, read_bytes
from ..prerequisites.workflows import parse_json
from ..state.database import trust_store
from ..state.project import GATEWAY_FILE, Project, stamp
from ..state.trust import TrustStore, waiting_note

FILE_NAME = GATEWAY_FILE
# gateway.json is a short hand-written file; anything bigger is a mistake.
MAX_FILE_BYTES = 1_000_000
# An upstream call that takes longer than this fails (and the upstream is checked before its next call).
DEFAULT_TIMEOUT = "60s"
# Upstream and tool names meet in `server__tool`: a name holding the separator could not be split back.
SEPARATOR = "__"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
# ${VAR} or ${VAR:-default}, as .mcp.json files write them.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# An `env` value that is exactly `${VAR:-}` passes VAR on from this server's environment when it is set, and leaves
# it out when it is not: an upstream starts with a bare environment, and an empty SSL_CERT_FILE breaks TLS where an
# unset one does not (`gateway add --env VAR` writes it).
_PASSED_ON = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-\}")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _duration(value: str) -> str:
    parse_duration(value)  # ValueError names the accepted forms
    return value


def _upstream_name(value: str) -> str:
    if SEPARATOR in value:
        raise ValueError(f"{value!r} holds {SEPARATOR!r}, which separates server and tool in tool names; rename it")
    return value


Duration = Annotated[StrictStr, AfterValidator(_duration), Field(description="A duration: 500ms, 30s, 5m, 1h")]


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout: Duration = Field(DEFAULT_TIMEOUT, description="How long one call to this server may take")  # type: ignore
    expose: Literal["none", "all"] = Field(
        "none",
        description="none: the server's tools are reached through tool_search and tool_call only; all: they are also "
        "listed directly as server__tool, through the same gates",
    )


class StdioUpstream(_Common):
    """A server the gateway starts as a subprocess and talks to over its stdin and stdout."""

    type: Literal["stdio"] = Field("stdio", description="Optional, as in .mcp.json")
    command: StrictStr = Field(min_length=1, description="The executable (found on PATH); ${VAR} is expanded")
    args: list[StrictStr] = Field(default_factory=list, description="Its arguments; ${VAR} is expanded")
    env: dict[str, StrictStr] = Field(
        default_factory=dict,
        description="Environment variables added to the bare one it starts with (HOME, PATH, USER, SHELL, TERM, "
        "LOGNAME); ${VAR} is expanded, and a value written exactly ${VAR:-} passes VAR on only when it is set",
    )
    cwd: StrictStr | None = Field(None, description="Working directory, relative to the project root")


class HttpUpstream(_Common):
    """A server reached over streamable HTTP."""

    type: Literal["http", "streamable-http"] = Field("http", description="Optional, as in .mcp.json")
    url: StrictStr = Field(pattern=r"^https?://", description="The server's MCP endpoint (http:// or https://)")
    headers: dict[str, StrictStr] = Field(default_factory=dict, description="HTTP headers, e.g. Authorization")


ServerName = Annotated[str, Field(pattern=_NAME), AfterValidator(_upstream_name)]


class CategoryRule(BaseModel):
    """A category of the tool cache (`abilities-mcp tools refresh`): the tools whose name or server fits a pattern."""

    model_config = ConfigDict(extra="forbid")

    description: StrictStr = Field("", description="What the category's tools do")
    keywords: list[StrictStr] = Field(default_factory=list, description="Words of tasks for these tools")
    servers: list[StrictStr] = Field(
        default_factory=list, description="Server names (globs: *sql*) whose every tool is in the category"
    )
    tools: list[StrictStr] = Field(default_factory=list, description="Tool names (globs: browser_*) in the category")


class GatewayFile(BaseModel):
    """gateway.json: the MCP servers behind the gateway, keyed by name (the `mcpServers` shape of .mcp.json)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: StrictStr | None = Field(None, alias="$schema", description="This schema, for editors")
    mcpServers: dict[ServerName, StdioUpstream | HttpUpstream] = Field(  # noqa: N815  # the .mcp.json key
        default_factory=dict, description="The upstream servers by name"
    )
    categories: dict[StrictStr, CategoryRule] = Field(
        default_factory=dict,
        description="Tool-cache categories, checked before the built-in ones (browser, github, database, graphql, "
        "docs, reasoning); one with a built-in's name replaces it",
    )


class Upstream(NamedTuple):
    """One upstream server as the gateway connects to it: variables expanded, paths resolved."""

    name: str
    command: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: Path | None
    url: str | None
    headers: dict[str, str]
    timeout: float


class GatewayConfig(NamedTuple):
    """Every usable upstream and the problems that kept others out."""

    upstreams: dict[str, Upstream]
    problems: list[Diagnostic]
    categories: dict[str, CategoryRule] = {}  # the file's own category rules (valid ones only)
    exposed: frozenset[str] = frozenset()  # the upstreams whose tools are listed directly (`expose: all`)
    pending: tuple[str, ...] = ()  # set when this is the trusted gateway.json an edit waits to replace


def json_schema() -> dict[str, Any]:
    """The JSON Schema editors use for gateway.json."""
    schema = GatewayFile.model_json_schema(by_alias=True)
    schema["title"] = "abilities-mcp gateway.json"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def read_gateway(path: Path, root: Path, environ: dict[str, str] | None = None) -> GatewayConfig:
    """gateway.json read and checked; a missing file is no upstreams, a broken server is left out."""
    return parse_gateway(path, _read_raw(path), root, environ)


def gateway_in_force(path: Path, root: Path, trust: TrustStore) -> GatewayConfig:
    """gateway.json as the gateway uses it: as written, unless an edit since a person trusted it re-points or moves
    an upstream (the gates that name it would then guard another server); then the trusted version, with a note."""
    raw = _read_raw(path)
    current = parse_gateway(path, raw, root)
    trusted_raw = trust.trusted(path) if trust.record(path) is not None else None
    if trusted_raw is None or trusted_raw == raw[0]:
        return current  # never trusted (a new upstream is new reach, not a lowered gate), or unchanged
    trusted = parse_gateway(path, (trusted_raw, []), root)
    reasons = lowerings(trusted, current)
    return trusted._replace(pending=(waiting_note(trust.key(path), reasons),)) if reasons else current


def lowerings(trusted: GatewayConfig, current: GatewayConfig) -> list[str]:
    """Upstreams an edit re-points (same name, another launch) or moves (same launch, another name)."""
    found = []
    for name, then in trusted.upstreams.items():
        now = current.upstreams.get(name)
        if now is not None and _launch(now) != _launch(then):
            found.append(f"upstream {name!r} re-pointed (its command, arguments, environment, folder, url or headers)")
        elif now is None:
            moved = [
                n for n, u in current.upstreams.items() if n not in trusted.upstreams and _launch(u) == _launch(then)
            ]
            found += [
                f"upstream {name!r} moved to {other!r} (gates naming {name!r} no longer reach it)" for other in moved
            ]
    return found


def _launch(upstream: Upstream) -> tuple:
    return (upstream.command, upstream.args, upstream.env, upstream.cwd, upstream.url, upstream.headers)


def parse_gateway(
    path: Path, read: tuple[bytes | None, list[Diagnostic]], root: Path, environ: dict[str, str] | None = None
) -> GatewayConfig:
    """gateway.json's bytes checked (`read`: the bytes and why they could not be read)."""
    data, problems = _parsed(path, read)
    if data is None:
        return GatewayConfig({}, problems)
    problems += _file_problems(path, data)
    misnamed = {p.path.removeprefix("mcpServers.") for p in problems}
    categories = _categories(data) if not any(p.path.startswith("categories") for p in problems) else {}
    env = dict(os.environ if environ is None else environ)
    upstreams, exposed = {}, set()
    for name, raw in _servers(data).items():
        if name in misnamed:
            continue
        entry, wrong = _entry(path, name, raw)
        if entry is not None and (unset := unset_variables(entry, env)):
            fix = f"set it where the server starts, or give a default: ${{{unset[0]}:-value}}"
            wrong = [Diagnostic(str(path), f"mcpServers.{name}", f"${{{unset[0]}}} is not set; {fix}")]
        problems += wrong
        if entry is not None and not wrong:
            upstreams[name] = _upstream(name, entry, root, env)
            if entry.expose == "all":  # not part of Upstream: changing it must not restart the connection
                exposed.add(name)
    return GatewayConfig(upstreams, problems, categories, frozenset(exposed))


def _categories(data: Any) -> dict[str, CategoryRule]:
    raw = data.get("categories") if isinstance(data, dict) else None
    return {name: CategoryRule.model_validate(rule) for name, rule in raw.items()} if isinstance(raw, dict) else {}


def file_report(project: Project) -> list[FileDiagnostics]:
    """gateway.json as `validate` lists it (kind `gateway`), when the project has one."""
    path = project.root / FILE_NAME
    return [FileDiagnostics("gateway", FILE_NAME, path, check_file(path))] if path.exists() else []


def check_file(path: Path) -> list[Diagnostic]:
    """Every problem in a gateway.json, each with the field and the fix."""
    data, problems = _read(path)
    if data is None:
        return problems
    problems += _file_problems(path, data)
    return problems + [d for name, raw in _servers(data).items() for d in _entry(path, name, raw)[1]]


def check_entry(path: Path, name: str, raw: Any) -> list[Diagnostic]:
    """Every problem of one server entry under one name, as the reader would find them (for edits before writing)."""
    named = _file_problems(path, {"mcpServers": {name: raw}})
    return named or _entry(path, name, raw)[1]


def _read(path: Path) -> tuple[Any, list[Diagnostic]]:
    return _parsed(path, _read_raw(path))


def _read_raw(path: Path) -> tuple[bytes | None, list[Diagnostic]]:
    try:
        return read_bytes(path, MAX_FILE_BYTES + 1), []
    except FileNotFoundError:
        return None, []
    except Unreadable as exc:
        return None, [Diagnostic(str(path), "", f"the file {exc}")]


def _parsed(path: Path, read: tuple[bytes | None, list[Diagnostic]]) -> tuple[Any, list[Diagnostic]]:
    raw, problems = read
    if raw is None:
        return None, problems
    try:
        return parse_json(decode_text(raw, MAX_FILE_BYTES), path)
    except Unreadable as exc:
        return None, [Diagnostic(str(path), "", f"the file {exc}")]


def _servers(data: Any) -> dict[str, Any]:
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return servers if isinstance(servers, dict) else {}


def _file_problems(path: Path, data: Any) -> list[Diagnostic]:
    """The file's own shape: an object, known top-level keys, `mcpServers` an object of well-named servers."""
    if not isinstance(data, dict):
        return [Diagnostic(str(path), "", 'must be a JSON object: {"mcpServers": {"NAME": {"command": ...}}}')]
    shape = {k: v for k, v in data.items() if k != "mcpServers"}
    if "mcpServers" in data:
        servers = data["mcpServers"]
        shape["mcpServers"] = {name: {"command": "x"} for name in servers} if isinstance(servers, dict) else servers
    try:
        GatewayFile.model_validate(shape)
    except ValidationError as exc:
        return [Diagnostic(str(path), p, m) for p, m in explain(exc, Format(GatewayFile))]
    return []


def _entry(path: Path, name: str, raw: Any) -> tuple[StdioUpstream | HttpUpstream | None, list[Diagnostic]]:
    """One server checked as the kind it says it is (`url`: streamable HTTP; else stdio)."""
    where = f"mcpServers.{name}"
    if not isinstance(raw, dict):
        return None, [Diagnostic(str(path), where, 'must be an object: {"command": ...} or {"url": ...}')]
    if "command" not in raw and "url" not in raw:
        fix = "a server needs either `command` (stdio) or `url` (streamable HTTP); add one"
        return None, [Diagnostic(str(path), where, fix)]
    model = HttpUpstream if "url" in raw else StdioUpstream
    try:
        return model.model_validate(raw), []
    except ValidationError as exc:
        return None, [Diagnostic(str(path), f"{where}.{p}" if p else where, m) for p, m in explain(exc, Format(model))]


def _upstream(name: str, entry: StdioUpstream | HttpUpstream, root: Path, env: dict[str, str]) -> Upstream:
    timeout = parse_duration(entry.timeout)
    if isinstance(entry, HttpUpstream):
        headers = {k: expand(v, env) for k, v in entry.headers.items()}
        return Upstream(name, None, (), {}, None, expand(entry.url, env), headers, timeout)
    cwd = root / expand(entry.cwd, env) if entry.cwd else root
    return Upstream(
        name,
        expand(entry.command, env),
        tuple(expand(a, env) for a in entry.args),
        environment(entry.env, env),
        cwd,
        None,
        {},
        timeout,
    )


def environment(written: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """An upstream's `env` expanded; an entry written exactly `${VAR:-}` is left out while VAR is unset or empty."""
    return {k: expand(v, env) for k, v in written.items() if not ((m := _PASSED_ON.fullmatch(v)) and not env.get(m[1]))}


def passed_on(name: str) -> str:
    """The `env` value that passes `name` on from this server's environment when it is set."""
    return f"${{{name}:-}}"


def expand(text: str, env: dict[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` replaced from the environment (the default when VAR is unset or empty)."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def unset_variables(entry: BaseModel, env: dict[str, str]) -> list[str]:
    """The `${VAR}`s of an entry that have no default and are not set: the server would start with a hole."""
    texts: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    collect(entry.model_dump())
    return sorted({m.group(1) for t in texts for m in _VARIABLE.finditer(t) if m.group(2) is None} - set(env))


class Gateway:
    """The project's gateway.json, re-read only when it changes on disk."""

    def __init__(self, project: Project):
        self.root = project.root
        self.file = project.root / FILE_NAME
        self.trust = trust_store(project)
        self._stamp: tuple | None = None
        self._current = GatewayConfig({}, [])

    def current(self) -> GatewayConfig:
        now = (*stamp(self.file), *self.trust.stamp())
        if now != self._stamp:
            self._current, self._stamp = gateway_in_force(self.file, self.root, self.trust), now
        return self._current
