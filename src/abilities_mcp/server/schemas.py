"""The tools' JSON Schemas generated once per version (schema_data.py), not at each start: a Tool built from them,
its argument model made by the SDK on the tool's first call.

The SDK's `Tool.from_function` builds each tool's argument model and generates its input and output schemas: about
half of `create_server`. schema_data.py holds what it generates for every tool, keyed by a digest of what those
schemas come from: this package's version, pydantic's minor version, the SDK's code that generates them, and the
modules that define the tools and the models they return. A key that does not match (an edited tool, another
pydantic) means live generation, as before. tests/server/test_tool_schemas.py asserts the file equals what the SDK
generates live (so it cannot go stale silently), and run as a script regenerates it:
`.venv/bin/python tests/server/test_tool_schemas.py`.

Only the advertised schemas come from the file. Arguments are still checked by the model the SDK builds from the
function's signature (`func_metadata`), on the tool's first call instead of at start-up; results by the model the
function returns. Nothing of the project or the state folder feeds any of it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pydantic
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.tools import base as sdk_tools
from mcp.server.mcpserver.utilities import func_metadata as sdk_metadata
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata, func_metadata
from mcp.shared._callable_inspection import is_async_callable
from mcp.shared.tool_name_validation import validate_and_warn_tool_name
from pydantic import PrivateAttr

from .. import __version__

# The SDK's modules whose code turns a function into its schemas: another release of them, another key.
SDK_SOURCES = (sdk_metadata, sdk_tools)
_keys: dict[tuple[str, ...], str] = {}  # a key per list of source modules, worked out once per process


class DeferredArguments(FuncMetadata):
    """FuncMetadata whose argument model the SDK builds from the function on the tool's first call: the same model
    `Tool.from_function` would have built at start-up, so every call is checked exactly as strictly."""

    _pending: tuple[Callable[..., Any], list[str]] | None = PrivateAttr(None)

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        if self._pending is not None:
            fn, skip = self._pending
            self.arg_model = func_metadata(fn, skip_names=skip, structured_output=False).arg_model
            self._pending = None
        return super().validate_arguments(arguments_to_validate)


def source_key(modules: Iterable[str]) -> str:
    """The digest the generated schemas are valid for, given the modules that define the tools and their results."""
    names = tuple(sorted(modules))
    if names not in _keys:
        digest = hashlib.sha256(f"{__version__}\0{'.'.join(pydantic.VERSION.split('.')[:2])}\0".encode())
        paths = [module.__file__ for module in SDK_SOURCES]
        paths += [importlib.util.find_spec(name).origin for name in names]  # found, not imported: gateway_tools
        for path in paths:
            digest.update(Path(path).read_bytes())  # a changed tool or model changes the key
        _keys[names] = digest.hexdigest()
    return _keys[names]


def generated() -> dict[str, Any] | None:
    """The generated tools by name, or None when schema_data.py is missing, unreadable or made for other sources."""
    try:
        from . import schema_data

        data = json.loads(schema_data.TOOLS)
        if data["key"] != source_key(data["sources"]):
            return None
        # each result model's schema is kept once (seven tools return a Run)
        return {name: {**entry, "output": data["outputs"][entry["returns"]]} for name, entry in data["tools"].items()}
    except (ImportError, OSError, ValueError, KeyError, TypeError, AttributeError):  # no file, a source not shipped
        return None


def known_tool(
    entry: dict[str, Any],
    fn: Callable[..., Any],
    name: str,
    title: str | None = None,
    description: str | None = None,
    annotations: Any = None,
    icons: Any = None,
    meta: dict[str, Any] | None = None,
) -> Tool:
    """The Tool `Tool.from_function` makes, from the generated entry: the same fields, the argument model later."""
    validate_and_warn_tool_name(name)
    module, _, qualname = entry["returns"].partition(":")
    metadata = DeferredArguments(
        arg_model=ArgModelBase, output_schema=entry["output"], output_model=getattr(sys.modules[module], qualname)
    )
    context = entry["context"]
    metadata._pending = (fn, [context] if context else [])
    return Tool(
        fn=fn,
        name=name,
        title=title,
        description=description or fn.__doc__ or "",
        parameters=entry["input"],
        fn_metadata=metadata,
        is_async=is_async_callable(fn),
        context_kwarg=context,
        annotations=annotations,
        icons=icons,
        meta=meta,
    )


def entry_of(tool: Tool) -> dict[str, Any] | None:
    """What the generated file keeps of a tool the SDK built, or None for one it cannot rebuild (resolvers, an output
    that is not a named model, unstructured output)."""
    model = tool.fn_metadata.output_model
    if tool.resolved_params or tool.fn_metadata.wrap_output or tool.output_schema is None:
        return None
    if not isinstance(model, type) or getattr(sys.modules.get(model.__module__), model.__qualname__, None) is not model:
        return None
    return {
        "returns": f"{model.__module__}:{model.__qualname__}",
        "context": tool.context_kwarg,
        "input": tool.parameters,
        "output": tool.output_schema,
    }


def render(tools: Iterable[Tool]) -> str:
    """The text of schema_data.py for these tools, built live by the SDK."""
    tools = list(tools)
    entries = {tool.name: entry for tool in tools if (entry := entry_of(tool)) is not None}
    sources = sorted({t.fn.__module__ for t in tools} | {e["returns"].partition(":")[0] for e in entries.values()})
    outputs = {entry["returns"]: entry.pop("output") for entry in entries.values()}
    data = {"key": source_key(sources), "sources": sources, "outputs": outputs, "tools": entries}
    text = json.dumps(data, indent=1)
    if '"""' in text or "\\\n" in text:
        raise ValueError("the schemas' JSON cannot sit in a raw triple-quoted string")
    return (
        "# ruff: noqa: E501\n"
        '"""Generated by tests/server/test_tool_schemas.py from what the SDK generates (server/schemas.py): do not '
        'edit."""\n\n'
        f'TOOLS = r"""{text}"""\n'
    )
