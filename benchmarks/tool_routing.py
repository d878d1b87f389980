"""tool_search's routing over 2,000 upstream tools (as a tool cache holds them): per query, `directory.search` (the
skill router over `server__tool` names and descriptions, its index built once per tool list) against a naive
keyword-overlap router on the same tools (the floor), interleaved.

    .venv/bin/python benchmarks/tool_routing.py [--quick]

The tools: 48 real tools (mcp-server-sqlite, server-everything, server-filesystem, GitHub, Playwright, Slack, the
seed's docs and reasoning servers), each copied onto servers named after them with a suffix until there are 2,000,
so names and descriptions repeat as they do when several instances of a server are configured. The MCP round trip
is not timed here (see gateway_roundtrip.py); the index build is reported apart.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _harness import log, ms, spread
from abilities_mcp.gateway.directory import Entry, Listing, search
from abilities_mcp.skills.router import Router
from routing_bench import Baseline

TOOLS = 2_000
MS_PER_QUERY_GOAL = 2.0
ROUNDS, QUICK_ROUNDS = 20, 2
BUILDS, QUICK_BUILDS = 3, 1
LIMIT = 5
SUFFIXES = ("prod", "staging", "eu", "us", "team", "legacy", "next", "local", "cloud", "internal", "ci", "archive")
# (server, tool, description) as the servers list them.
REAL = [
    ("sqlite", "read_query", "Execute a SELECT query on the SQLite database"),
    ("sqlite", "write_query", "Execute an INSERT, UPDATE, or DELETE query on the SQLite database"),
    ("sqlite", "create_table", "Create a new table in the SQLite database"),
    ("sqlite", "list_tables", "List all tables in the SQLite database"),
    ("sqlite", "describe_table", "Get the schema information for a specific table"),
    ("sqlite", "append_insight", "Add a business insight to the memo"),
    ("everything", "echo", "Echoes back the input string"),
    ("everything", "get-sum", "Returns the sum of two numbers"),
    ("everything", "get-env", "Returns all environment variables, helpful for debugging MCP server configuration"),
    ("everything", "get-tiny-image", "Returns a tiny MCP logo image."),
    ("everything", "trigger-long-running-operation", "Demonstrates a long running operation with progress updates."),
    ("everything", "gzip-file-as-resource", "Compresses a single file using gzip compression."),
    ("everything", "get-structured-content", "Returns structured content along with an output schema"),
    ("fs", "read_text_file", "Read the complete contents of a file from the file system as text"),
    ("fs", "write_file", "Create a new file or completely overwrite an existing file with new content"),
    ("fs", "edit_file", "Make line-based edits to a text file, returning a git-style diff"),
    ("fs", "list_directory", "Get a detailed listing of all files and directories in a specified path"),
    ("fs", "directory_tree", "Get a recursive tree view of files and directories as a JSON structure"),
    ("fs", "move_file", "Move or rename files and directories"),
    ("fs", "search_files", "Recursively search for files and directories matching a pattern"),
    ("fs", "get_file_info", "Retrieve detailed metadata about a file or directory: size, times, permissions"),
    ("github", "create_issue", "Create a new issue in a GitHub repository"),
    ("github", "list_issues", "List issues in a GitHub repository with filtering options"),
    ("github", "create_pull_request", "Create a new pull request in a GitHub repository"),
    ("github", "get_pull_request", "Get details of a specific pull request"),
    ("github", "merge_pull_request", "Merge a pull request"),
    ("github", "search_code", "Search for code across GitHub repositories"),
    ("github", "get_file_contents", "Get the contents of a file or directory from a GitHub repository"),
    ("github", "create_branch", "Create a new branch in a GitHub repository"),
    ("github", "list_commits", "Get list of commits of a branch in a GitHub repository"),
    ("playwright", "browser_navigate", "Navigate to a URL"),
    ("playwright", "browser_click", "Perform click on a web page"),
    ("playwright", "browser_type", "Type text into editable element"),
    ("playwright", "browser_take_screenshot", "Take a screenshot of the current page"),
    ("playwright", "browser_snapshot", "Capture accessibility snapshot of the current page"),
    ("playwright", "browser_fill_form", "Fill multiple form fields"),
    ("slack", "slack_post_message", "Post a new message to a Slack channel"),
    ("slack", "slack_list_channels", "List public channels in the workspace"),
    ("slack", "slack_get_channel_history", "Get recent messages from a channel"),
    ("slack", "slack_reply_to_thread", "Reply to a specific message thread in Slack"),
    ("docs", "resolve-library-id", "Resolves a package name to a library ID for fetching its documentation"),
    ("docs", "get-library-docs", "Fetches up-to-date documentation for a library"),
    ("reasoning", "sequentialthinking", "A detailed tool for dynamic and reflective problem-solving through thoughts"),
    ("graphql", "introspect-schema", "Introspect the GraphQL schema of the endpoint"),
    ("graphql", "query-graphql", "Run a GraphQL query against the endpoint"),
    ("postgres", "query", "Run a read-only SQL query against the Postgres database"),
    ("memory", "create_entities", "Create multiple new entities in the knowledge graph"),
    ("memory", "search_nodes", "Search for nodes in the knowledge graph based on a query"),
]
TASKS = [
    "run a SQL query on the database",
    "which tables exist",
    "show me the columns of the orders table",
    "echo my message back",
    "add two numbers",
    "read the README file",
    "overwrite config.yaml with new settings",
    "list the files in the src folder",
    "rename a file",
    "open an issue about the crash",
    "create a pull request for this branch",
    "merge the PR",
    "search the code for the parser",
    "go to the login page in the browser",
    "click the submit button",
    "take a screenshot of the page",
    "post a message to the team channel",
    "what did people say in the channel today",
    "find the docs for the react library",
    "think step by step about the design",
    "introspect the graphql schema",
    "compress the log file",
    "what environment variables does the server see",
    "remember that the customer prefers email",
]


def tools(count: int) -> list[Entry]:
    """`count` tools: the real ones, then copies on servers named `<server>-<suffix>-<n>`."""
    found: list[Entry] = []
    copy = 0
    while len(found) < count:
        for server, name, description in REAL:
            suffix = f"-{SUFFIXES[copy % len(SUFFIXES)]}-{copy // len(SUFFIXES)}" if copy else ""
            found.append(Entry(f"{server}{suffix}", name, description, {"type": "object"}))
            if len(found) == count:
                break
        copy += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds instead of {ROUNDS}")
    args = parser.parse_args()
    rounds, builds = (QUICK_ROUNDS, QUICK_BUILDS) if args.quick else (ROUNDS, BUILDS)

    entries = tools(TOOLS)
    listing = Listing(entries, time.time(), [], {})
    pairs = [(e.qualified, e.description) for e in entries]
    build_times = []
    for _ in range(builds):
        started = time.perf_counter()
        Router(pairs)
        build_times.append(time.perf_counter() - started)
    baseline = Baseline(pairs)
    search(listing, TASKS[0], LIMIT)  # the index, built once for this tool list
    ours: list[float] = []
    floor: list[float] = []
    contenders = [
        (ours, lambda task: search(listing, task, LIMIT)),
        (floor, lambda task: baseline.route(task, LIMIT)),
    ]
    for r in range(rounds):
        for i, task in enumerate(TASKS):
            order = contenders if (r + i) % 2 == 0 else contenders[::-1]
            for samples, route in order:
                started = time.perf_counter()
                route(task)
                samples.append(time.perf_counter() - started)

    log(f"tool routing: {TOOLS:,} tools on {len({e.server for e in entries})} servers, {len(TASKS)} tasks x {rounds}")
    log(f"  index build     {spread(build_times)} (once per tool list)")
    log(f"  tool_search     {spread(ours)}")
    log(f"  keyword floor   {spread(floor)}")
    for task in TASKS[:3]:
        log(f"  {task!r}: {[f.entry.qualified for f in search(listing, task, 3)]}")
    mine, base = statistics.median(ours), statistics.median(floor)
    print(
        f"tool routing: ratio {mine / base:.2f} (no goal) median {ms(mine)} ms vs floor {ms(base)} ms over "
        f"{len(ours)} queries | {ms(mine)} ms/query at {TOOLS:,} tools (goal <= {MS_PER_QUERY_GOAL:g} ms)",
        flush=True,
    )


if __name__ == "__main__":
    main()
