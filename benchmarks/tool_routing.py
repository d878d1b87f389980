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
from collections.abc import Callable

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
# Tasks as people type them, each with the tools that would do it (any of them counts), written from the tools'
# purposes before measuring; split alternately into dev (routing may be tuned on it) and test (held out).
LABELED = [
    ("run a SQL query on the database", "sqlite__read_query postgres__query"),
    ("which tables exist", "sqlite__list_tables"),
    ("show me the columns of the orders table", "sqlite__describe_table"),
    ("echo my message back", "everything__echo"),
    ("add two numbers", "everything__get-sum"),
    ("read the README file", "fs__read_text_file github__get_file_contents"),
    ("overwrite config.yaml with new settings", "fs__write_file"),
    ("list the files in the src folder", "fs__list_directory fs__directory_tree"),
    ("rename a file", "fs__move_file"),
    ("open an issue about the crash", "github__create_issue"),
    ("create a pull request for this branch", "github__create_pull_request"),
    ("merge the PR", "github__merge_pull_request"),
    ("search the code for the parser", "github__search_code"),
    ("go to the login page in the browser", "playwright__browser_navigate"),
    ("click the submit button", "playwright__browser_click"),
    ("take a screenshot of the page", "playwright__browser_take_screenshot"),
    ("post a message to the team channel", "slack__slack_post_message"),
    ("what did people say in the channel today", "slack__slack_get_channel_history"),
    ("find the docs for the react library", "docs__get-library-docs docs__resolve-library-id"),
    ("think step by step about the design", "reasoning__sequentialthinking"),
    ("introspect the graphql schema", "graphql__introspect-schema"),
    ("compress the log file", "everything__gzip-file-as-resource"),
    ("what environment variables does the server see", "everything__get-env"),
    ("remember that the customer prefers email", "memory__create_entities"),
    ("insert a new row into the customers table", "sqlite__write_query"),
    ("make a table for invoices", "sqlite__create_table"),
    ("note down the insight that churn rose in march", "sqlite__append_insight"),
    ("what's in docs/setup.md", "fs__read_text_file github__get_file_contents"),
    ("replace the word foo with bar on line 12 of app.py", "fs__edit_file"),
    ("show the whole folder structure as a tree", "fs__directory_tree"),
    ("how big is data.csv and when was it last modified", "fs__get_file_info"),
    ("find all the yaml files under config", "fs__search_files"),
    ("which issues are open on the repo", "github__list_issues"),
    ("start a new branch called fix-login", "github__create_branch"),
    ("show the recent commits on main", "github__list_commits"),
    ("what changed in pull request 42", "github__get_pull_request"),
    ("type my email into the username field", "playwright__browser_type"),
    ("fill in the signup form with test data", "playwright__browser_fill_form"),
    ("reply in the thread under alice's message", "slack__slack_reply_to_thread"),
    ("which slack channels do we have", "slack__slack_list_channels"),
    ("run this graphql query for the user's orders", "graphql__query-graphql"),
    ("query the postgres db for last week's signups", "postgres__query"),
    ("look up what we know about the acme account in the knowledge graph", "memory__search_nodes"),
    ("get a small test image", "everything__get-tiny-image"),
    ("return some structured content with a schema", "everything__get-structured-content"),
    ("simulate a long task and report its progress", "everything__trigger-long-running-operation"),
    ("get the contents of src/main.py from the github repo", "github__get_file_contents"),
    ("capture the accessibility tree of the current page", "playwright__browser_snapshot"),
    ("what's the schema of the users table", "sqlite__describe_table"),
    ("fetch the up to date nextjs docs", "docs__get-library-docs"),
]
TASKS = [task for task, _ in LABELED]


def quality(route: Callable[[str], list[str]]) -> dict[str, tuple[float, float]]:
    """(top-1, top-3) per split and over all, of a router naming tools best first."""
    found: dict[str, list[tuple[bool, bool]]] = {"dev": [], "test": [], "all": []}
    for i, (task, right) in enumerate(LABELED):
        names, wanted = route(task)[:3], set(right.split())
        hit = (bool(names) and names[0] in wanted, bool(wanted & set(names)))
        found["dev" if i % 2 == 0 else "test"].append(hit)
        found["all"].append(hit)
    return {k: (sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for k, v in found.items()}


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
    real = tools(len(REAL))  # each real tool once: the eval's labels name them
    real_listing = Listing(real, time.time(), [], {})
    real_baseline = Baseline([(e.qualified, e.description) for e in real])
    ranked = {
        "tool_search": quality(lambda task: [f.entry.qualified for f in search(real_listing, task, 3)]),
        "keyword baseline": quality(lambda task: real_baseline.route(task, 3)),
    }
    log(f"tool routing quality: {len(LABELED)} labeled tasks over the {len(REAL)} real tools (dev / test alternate)")
    for name, figures in ranked.items():
        log(f"  {name:16} " + "  ".join(f"{k} top-1 {t1:.2f} top-3 {t3:.2f}" for k, (t1, t3) in figures.items()))
    mine, base = statistics.median(ours), statistics.median(floor)
    (t1, t3), (b1, b3) = ranked["tool_search"]["all"], ranked["keyword baseline"]["all"]
    print(
        f"tool routing quality: top-1 {t1:.2f} top-3 {t3:.2f} on {len(LABELED)} tasks over {len(REAL)} real tools "
        f"(keyword baseline top-1 {b1:.2f} top-3 {b3:.2f})",
        flush=True,
    )
    print(
        f"tool routing: ratio {mine / base:.2f} (no goal) median {ms(mine)} ms vs floor {ms(base)} ms over "
        f"{len(ours)} queries | {ms(mine)} ms/query at {TOOLS:,} tools (goal <= {MS_PER_QUERY_GOAL:g} ms)",
        flush=True,
    )


if __name__ == "__main__":
    main()
