"""Which tests are `slow`: what the quick subset for the edit-test loop, `pytest -q -n auto -m "not slow"`
(README), leaves out. The full command, CI's, runs everything.

Slow is what drives something outside the test's process for seconds: the real agent clients and the Inspector from
npm, real upstream MCP servers, building the package, whole server processes killed and restarted, the CLI in a
terminal. Chosen from `--durations` on 2 shared cores; what stays covers every capability through the in-memory
client (abilities, engine, skills, prerequisites, the gateway's gates, the hook, init, state, the server's tools),
plus a few commands of the CLI and one real upstream behind the gateway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent

# Whole modules, by path under tests/.
SLOW_MODULES = {
    # The real agent clients, installed from npm and driven headless by a scripted model.
    "clients/test_claude_code.py",
    "clients/test_opencode.py",
    "clients/test_opencode_plugin.py",
    "clients/test_codex.py",
    "clients/test_gemini.py",
    "clients/test_sandboxes.py",
    "clients/test_edited_rules.py",
    "clients/test_call_approvals.py",
    "clients/test_claude_code_team.py",
    "clients/test_claude_code_four_eyes.py",
    # Team mode: the real OpenID provider (Node) and whole team server processes, the page in Chromium.
    "team/test_team_browser.py",
    "team/test_team_inspector.py",
    "team/test_four_eyes.py",
    # The MCP Inspector (npx) and real upstream servers (PyPI, npm), the gateway's upstream processes.
    "server/test_inspector.py",
    "gateway/test_everything_upstream.py",
    "gateway/test_filesystem_upstream.py",
    "gateway/test_sqlite_gates.py",
    "gateway/test_tool_cache.py",
    "gateway/test_gateway_cli.py",
    "gateway/test_link.py",
    "gateway/test_batch_chain.py",
    "clients/test_init_gateway.py",
    # The local page in a real headless Chromium, with a page process per test.
    "ui/test_browser.py",
    "ui/test_ui_command.py",
    # Packaging: the sdist and the wheel built and installed; skills-ref against the real-skills corpus.
    "cli/test_package.py",
    "skills/test_skills_ref_parity.py",
    # Whole server processes over stdio: killed, flooded, restarted; step process groups and what escapes them.
    "server/test_stdio.py",
    "server/test_lane.py",
    "server/test_tracing_lane.py",
    "server/test_deploy_end_to_end.py",
    "engine/test_processes.py",
    "cli/test_logs_follow.py",
    # The CLI at a terminal and in a subprocess per call (tests/cli/test_cli.py keeps its core in the quick subset).
    "cli/test_first_minutes.py",
    "cli/test_person.py",
    "cli/test_run_output.py",
    "cli/test_skills_cli.py",
    "cli/test_terminal_answers.py",
    "cli/test_trust_command.py",
    "cli/test_validate_words.py",
    "cli/test_workflows_cli.py",
    "cli/test_doctor.py",
    "cli/test_serve_banner.py",
    # The project's folders resolved by the CLI and the server in subprocesses (the fixtures resolve them in-process).
    "state/test_project.py",
    # The stdio server on a PostgreSQL state (a throwaway cluster, tests/postgres_support.py) and the CLI reading it.
    "state/test_postgres_server.py",
    # Team server replicas as processes on one PostgreSQL, killed and cut from it mid-run (tests/replica_support.py).
    "team/test_replicas.py",
    # The hook as Claude Code runs it, a process per call (tests/clients/test_hook_clients.py keeps the hook command
    # in the quick subset), and the gateway's refresh and templates against real upstream processes.
    "clients/test_hook.py",
    "gateway/test_upstream_environment.py",
    "gateway/test_sqlite_template.py",
    # Guarantee suites of many cases, each with a server or a command of its own: hostile files and protocol lines,
    # forged answers, the server's process closed to other processes.
    "test_hostile_input.py",
    "engine/test_forged_answers.py",
    "server/test_isolation.py",
}
# Single tests (every case of one) in otherwise quick modules, by path and test function: each starts the CLI or a
# server process per case, or many processes at once.
SLOW_TESTS = {
    "test_docs.py::test_each_transcript_prints_what_the_page_shows",
    "test_docs.py::test_every_json_example_parses_and_a_workflows_json_one_validates",
    "test_docs.py::test_the_files_shown_for_a_client_are_what_init_writes",
    "test_hostile_input.py::test_validate_warns_where_a_value_reaches_a_command_that_runs_it_as_code",
    "test_hostile_input.py::test_a_hostile_file_is_named_with_its_problem_and_the_rest_of_the_project_still_loads",
    "test_hostile_input.py::test_every_protocol_line_is_answered_and_the_server_goes_on_serving",
    "test_hostile_input.py::test_a_broken_state_file_is_moved_aside_and_the_command_goes_on_with_a_fresh_one",
    "test_hostile_input.py::test_the_server_starts_on_a_broken_state_file_moving_it_aside_and_saying_so",
    "state/test_store.py::test_a_server_started_with_history_cut_short_erases_no_answer",
    "state/test_store.py::test_processes_creating_a_new_state_file_at_the_same_moment_all_open_it",
    "state/test_postgres.py::test_the_embedded_default_never_imports_psycopg",
    "clients/test_hook.py::test_the_server_and_many_hook_processes_share_the_state_file_at_once_and_lose_nothing",
    "engine/test_nested_runs.py::test_after_a_sigkill_both_runs_are_interrupted_and_resuming_the_parent_resumes_the_same_child",
    "cli/test_cli.py::test_run_exits_2_and_says_what_is_wrong_with_the_inputs_on_stderr",
    "cli/test_cli.py::test_the_server_writes_nothing_to_stdout_before_the_client_speaks",
    "cli/test_cli.py::test_run_exits_1_when_a_step_fails",
    "cli/test_cli.py::test_validate_exits_0_on_a_clean_project",
    "cli/test_cli.py::test_validate_passes_on_this_repository",
    "cli/test_cli.py::test_status_of_an_unknown_run_exits_2_and_says_so",
    "engine/test_step_environment.py::test_the_shipped_test_suite_runs_the_tests_with_the_servers_python_not_paths",
    "engine/test_nested_runs.py::test_a_child_its_parent_stops_is_cancelled_not_interrupted_and_runs_its_after_hooks",
    "server/test_workflow_tools.py::test_the_done_when_flow_through_a_stdio_server_on_the_repos_own_workflows",
    "test_architecture.py::test_a_forbidden_import_breaks_the_contract_that_names_it",
    "prerequisites/test_spec_warnings.py::test_the_validate_command_prints_the_warning_and_still_passes",
    "state/test_settings.py::test_the_cli_prints_the_schema_and_validate_reports_the_file",
    "state/test_privacy.py::test_an_open_state_folder_is_closed_when_the_cli_or_the_server_starts",
    "gateway/test_config.py::test_the_validate_command_fails_on_a_broken_gateway_json",
    "abilities/test_format_page.py::test_each_example_on_the_format_page_runs_as_written",
    "skills/test_builtin.py::test_the_built_wheel_carries_them",
    "state/test_settings_trust.py::test_a_project_file_that_shortens_history_erases_no_run_at_the_next_start",
    "server/test_hardening.py::test_sigterm_interrupts_a_live_run_and_the_server_exits",
    "cli/test_cli.py::test_the_server_keeps_only_as_many_finished_runs_as_history_runs_says",
    "cli/test_cli.py::test_status_and_history_show_a_run_made_at_the_terminal",
    "cli/test_cli.py::test_run_at_a_terminal_shows_an_agent_step_and_takes_the_typed_answer",
    "team/test_team_hooks.py::test_the_client_hook_denies_a_tool_call_it_gets_no_usable_answer_for",
}

# Cases of one module at other levels than the default: a case is slow when a dash-separated part of its id is one
# of these (the quick subset keeps every rule of the misbehaving agent at `strict`).
SLOW_CASES = {"engine/test_misbehaving_agent.py": {"normal", "loose"}}


def mark_slow(items: list[pytest.Item]) -> None:
    """Put the `slow` marker on every collected test the lists above name."""
    for item in items:
        try:
            module = item.path.relative_to(TESTS).as_posix()
        except ValueError:
            continue
        name = getattr(item, "originalname", item.name)
        case = item.callspec.id.split("-") if hasattr(item, "callspec") else []
        if (
            module in SLOW_MODULES
            or f"{module}::{name}" in SLOW_TESTS
            or SLOW_CASES.get(module, set()).intersection(case)
        ):
            item.add_marker(pytest.mark.slow)
