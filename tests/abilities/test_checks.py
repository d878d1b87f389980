"""Load-time checks over a whole ability file (DESIGN §3): the needs graph, conditions, references, defaults,
regexes and working directories. Each problem is reported by ability_validate with the file, the field and the fix."""

import textwrap
from pathlib import Path

import pytest
import yaml
from mcp import Client

from abilities_mcp.abilities.checks import ancestors, check_ability, execution_order
from abilities_mcp.abilities.models import Ability


async def errors_of(client: Client, path: Path) -> list[dict]:
    """The errors ability_validate reports for one file."""
    result = await client.call_tool("ability_validate", {})
    assert not result.is_error, result.content
    [entry] = [f for f in result.structured_content["files"] if f["path"] == str(path)]
    assert entry["valid"] is (not entry["errors"])
    return entry["errors"]


def assert_error(errors: list[dict], path: str, *fragments: str) -> None:
    """One error at this field path whose message holds every fragment."""
    at_path = [e["message"] for e in errors if e["path"] == path]
    assert at_path, f"no error at {path!r}; got {errors}"
    assert any(all(f in m for f in fragments) for m in at_path), f"{fragments} not in {at_path}"


def ability(text: str) -> Ability:
    return Ability.model_validate(yaml.safe_load(textwrap.dedent(text)))


CASES = [
    (
        "duplicate-step-ids",
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: build, type: script, run: y}
        """,
        "steps[1].id",
        ("duplicate step id 'build' (also steps[0]); give each step its own id",),
    ),
    (
        "needs-unknown-step-with-did-you-mean",
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: ship, type: script, run: y, needs: [bulid]}
        """,
        "steps[1].needs[0]",
        ("unknown step 'bulid'; did you mean 'build'?",),
    ),
    (
        "needs-unknown-step-nothing-close",
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: ship, type: script, run: y, needs: [build, zzz]}
        """,
        "steps[1].needs[1]",
        ("unknown step 'zzz'; known steps: build, ship",),
    ),
    (
        "step-needs-itself",
        """
        steps:
          - {id: build, type: script, run: x, needs: build}
        """,
        "steps[0].needs[0]",
        ("step 'build' needs itself; remove it from needs",),
    ),
    (
        "two-step-cycle",
        """
        steps:
          - {id: a, type: script, run: x, needs: b}
          - {id: b, type: script, run: y, needs: a}
        """,
        "steps[0].needs",
        ("needs form a cycle a → b → a; remove one of these needs",),
    ),
    (
        "three-step-cycle",
        """
        steps:
          - {id: a, type: script, run: x, needs: c}
          - {id: b, type: script, run: y, needs: a}
          - {id: c, type: script, run: z, needs: b}
        """,
        "steps[0].needs",
        ("needs form a cycle a → b → c → a",),
    ),
    (
        "when-does-not-parse",
        """
        steps:
          - {id: a, type: script, run: x, when: 'inputs.env =='}
        inputs: {env: {}}
        """,
        "steps[0].when",
        ("condition does not parse:", "ends too early; a value is missing"),
    ),
    (
        "when-unknown-input-with-did-you-mean",
        """
        inputs: {environment: {}}
        steps:
          - {id: a, type: script, run: x, when: 'inputs.enviroment == "production"'}
        """,
        "steps[0].when",
        ("unknown input 'enviroment'; did you mean inputs.environment?",),
    ),
    (
        "when-unknown-input-nothing-close",
        """
        steps:
          - {id: a, type: script, run: x, when: 'inputs.region == "eu"'}
        """,
        "steps[0].when",
        ("unknown input 'region'; declare it under inputs:",),
    ),
    (
        "when-unknown-step",
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: ship, type: script, run: y, needs: build, when: 'steps.biuld.status == "completed"'}
        """,
        "steps[1].when",
        ("unknown step 'biuld'; did you mean steps.build?",),
    ),
    (
        "when-names-a-later-step",
        """
        steps:
          - {id: ship, type: script, run: y, when: 'steps.build.exit_code == 0'}
          - {id: build, type: script, run: x}
        """,
        "steps[0].when",
        ("step 'build' does not run before 'ship'; add 'build' to the needs of 'ship'",),
    ),
    (
        "when-names-its-own-step",
        """
        steps:
          - {id: ship, type: script, run: y, when: 'steps.ship.status == "failed"'}
        """,
        "steps[0].when",
        ("step 'ship' does not run before 'ship'",),
    ),
    (
        "run-unknown-input",
        """
        inputs: {version: {}}
        steps:
          - {id: a, type: script, run: 'echo {{inputs.verison}}'}
        """,
        "steps[0].run",
        ("unknown input 'verison'; did you mean inputs.version?",),
    ),
    (
        "prompt-unknown-step",
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: review, type: agent, prompt: 'Review {{steps.biuld.output}}', needs: build}
        """,
        "steps[1].prompt",
        ("unknown step 'biuld'; did you mean steps.build?",),
    ),
    (
        "run-names-a-later-step",
        """
        steps:
          - {id: report, type: script, run: 'echo {{steps.build.output}}'}
          - {id: build, type: script, run: x}
        """,
        "steps[0].run",
        ("step 'build' does not run before 'report'; add 'build' to the needs of 'report'",),
    ),
    (
        "parallel-step-names-a-step-it-does-not-need",
        """
        settings: {parallel: true}
        steps:
          - {id: build, type: script, run: x}
          - {id: report, type: script, run: 'echo {{steps.build.exit_code}}'}
        """,
        "steps[1].run",
        ("step 'build' does not run before 'report'; add 'build' to the needs of 'report'",),
    ),
    (
        "env-unknown-input",
        """
        steps:
          - {id: a, type: script, run: x, env: {TARGET: '{{inputs.target}}'}}
        """,
        "steps[0].env.TARGET",
        ("unknown input 'target'",),
    ),
    (
        "context-unknown-input",
        """
        steps:
          - {id: a, type: agent, prompt: p, context: ['{{inputs.dir}}']}
        """,
        "steps[0].context[0]",
        ("unknown input 'dir'",),
    ),
    (
        "workflow-inputs-unknown-input",
        """
        steps:
          - {id: a, type: workflow, workflow: other, inputs: {env: '{{inputs.evn}}'}}
        inputs: {env: {}}
        """,
        "steps[0].inputs.env",
        ("unknown input 'evn'; did you mean inputs.env?",),
    ),
    (
        "approval-prompt-unknown-input",
        """
        steps:
          - {id: a, type: approval, prompt: 'Ship {{inputs.version}}?'}
        """,
        "steps[0].prompt",
        ("unknown input 'version'",),
    ),
    (
        "placeholder-that-is-not-a-reference",
        """
        steps:
          - {id: a, type: script, run: 'echo {{env.HOME}}'}
        """,
        "steps[0].run",
        ("{{env.HOME}} is not a reference; use {{inputs.<name>}}",),
    ),
    (
        "hook-names-a-step",
        """
        steps:
          - {id: build, type: script, run: x}
        hooks: {after: ['echo {{steps.build.output}}']}
        """,
        "hooks.after[0]",
        ("hooks cannot refer to step 'build'; hooks run outside the steps",),
    ),
    (
        "hook-unknown-input",
        """
        steps:
          - {id: build, type: script, run: x}
        hooks: {before: ['check {{inputs.nope}}']}
        """,
        "hooks.before[0]",
        ("unknown input 'nope'; declare it under inputs:",),
    ),
    (
        "default-breaks-type",
        """
        inputs: {replicas: {type: integer, default: many}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.replicas.default",
        ("default breaks its own rules: expected an integer, got 'many'; change the default",),
    ),
    (
        "default-breaks-enum",
        """
        inputs: {env: {enum: [staging, production], default: prod}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.env.default",
        ("default breaks its own rules: 'prod' is not one of ['staging', 'production']",),
    ),
    (
        "default-breaks-pattern",
        """
        inputs: {version: {pattern: '^v\\d+$', default: latest}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.version.default",
        ("default breaks its own rules: 'latest' does not match the pattern",),
    ),
    (
        "default-breaks-min",
        """
        inputs: {n: {type: integer, min: 5, default: 2}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.n.default",
        ("2 is below the minimum 5",),
    ),
    (
        "default-breaks-max-length",
        """
        inputs: {code: {maxLength: 2, default: abc}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.code.default",
        ("length 3 is above maxLength 2",),
    ),
    (
        "min-above-max",
        """
        inputs: {n: {type: integer, min: 10, max: 1}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.n.min",
        ("min 10 is above max 1; swap them",),
    ),
    (
        "empty-enum",
        """
        inputs: {env: {enum: []}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.env.enum",
        ("enum is empty; list the allowed values or remove enum",),
    ),
    (
        "input-pattern-does-not-compile",
        """
        inputs: {version: {pattern: '(v\\d+'}}
        steps: [{id: a, type: script, run: x}]
        """,
        "inputs.version.pattern",
        ("regular expression '(v\\\\d+' does not compile:", "fix or escape it"),
    ),
    (
        "trigger-pattern-does-not-compile",
        """
        triggers: {patterns: ['deploy', '[a-']}
        steps: [{id: a, type: script, run: x}]
        """,
        "triggers.patterns[1]",
        ("regular expression '[a-' does not compile: unterminated character set", "fix or escape it"),
    ),
    (
        "output-matches-does-not-compile",
        """
        steps:
          - {id: a, type: agent, prompt: p, validation: {output_matches: '*APPROVED'}}
        """,
        "steps[0].validation.output_matches",
        ("regular expression '*APPROVED' does not compile: nothing to repeat", "fix or escape it"),
    ),
    (
        "cwd-climbs-out",
        """
        steps: [{id: a, type: script, run: x, cwd: ../elsewhere}]
        """,
        "steps[0].cwd",
        ("cwd '../elsewhere' leaves the project root; use a path relative to it",),
    ),
    (
        "cwd-absolute",
        """
        steps: [{id: a, type: script, run: x, cwd: /etc}]
        """,
        "steps[0].cwd",
        ("cwd '/etc' leaves the project root",),
    ),
    (
        "cwd-climbs-out-through-a-subfolder",
        """
        steps: [{id: a, type: script, run: x, cwd: packages/../../x}]
        """,
        "steps[0].cwd",
        ("cwd 'packages/../../x' leaves the project root",),
    ),
]


@pytest.mark.parametrize(("body", "path", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_a_whole_file_check_reports_the_file_the_field_and_the_fix(client: Client, root, body, path, fix):
    file = root / "abilities" / "checked.yaml"
    file.write_text("description: d\n" + textwrap.dedent(body))
    assert_error(await errors_of(client, file), path, *fix)


@pytest.mark.parametrize(
    "body",
    [
        """
        steps:
          - {id: build, type: script, run: x}
          - {id: report, type: script, run: 'echo {{steps.build.output}} {{steps.build.exit_code}}'}
        """,
        """
        settings: {parallel: true}
        steps:
          - {id: build, type: script, run: x}
          - {id: test, type: script, run: y, needs: build}
          - {id: report, type: agent, prompt: '{{steps.build.output}}', needs: test}
        """,
        """
        inputs: {env: {enum: [staging, production], default: staging}}
        steps:
          - {id: build, type: script, run: x}
          - id: notify
            type: script
            run: 'echo "{{inputs.env}}: {{ steps.build.status }}"'
            needs: build
            when: 'failure() || (steps.build.exit_code != 0 && inputs.env in ["production"])'
        """,
        """
        inputs:
          n: {type: integer, min: 1, max: 10, default: '5'}
          flag: {type: boolean, default: 'yes'}
          version: {pattern: '^v\\d+$', default: v1}
        steps: [{id: a, type: script, run: x, cwd: packages/api/../web}]
        """,
        """
        steps:
          - {id: a, type: script, run: x, cwd: '{{inputs.dir}}'}
        inputs: {dir: {default: sub}}
        """,
    ],
    ids=[
        "sequential-step-uses-an-earlier-step",
        "parallel-step-uses-a-step-it-needs-through-another",
        "condition-and-placeholders-in-order",
        "defaults-that-fit-after-coercion-and-a-cwd-inside-the-root",
        "templated-cwd",
    ],
)
async def test_a_sound_file_passes_every_check(client: Client, root, body) -> None:
    file = root / "abilities" / "sound.yaml"
    file.write_text("description: d\n" + textwrap.dedent(body))
    assert await errors_of(client, file) == []


async def test_a_cycle_is_reported_at_a_step_inside_the_cycle(client: Client, root) -> None:
    file = root / "abilities" / "loop.yaml"
    file.write_text(
        textwrap.dedent("""
        description: d
        steps:
          - {id: entry, type: script, run: x, needs: a}
          - {id: a, type: script, run: x, needs: b}
          - {id: b, type: script, run: x, needs: a}
    """)
    )
    [error] = await errors_of(client, file)
    assert "a → b → a" in error["message"]
    assert error["path"] in ("steps[1].needs", "steps[2].needs")


async def test_every_bad_reference_in_one_field_is_reported(client: Client, root) -> None:
    file = root / "abilities" / "refs.yaml"
    file.write_text(
        textwrap.dedent("""
        description: d
        inputs: {env: {}}
        steps:
          - {id: a, type: script, run: 'echo {{inputs.enn}} {{steps.later.output}} {{steps.zz.output}}'}
          - {id: later, type: script, run: x}
    """)
    )
    errors = await errors_of(client, file)
    assert [e["path"] for e in errors] == ["steps[0].run"] * 3
    assert [e["message"].split(";")[0] for e in errors] == [
        "unknown input 'enn'",
        "step 'later' does not run before 'a'",
        "unknown step 'zz'",
    ]


def test_a_sound_graph_orders_steps_topologically_with_yaml_order_breaking_ties() -> None:
    a = ability("""
        description: d
        steps:
          - {id: deploy, type: script, run: x, needs: [test, build]}
          - {id: build, type: script, run: x}
          - {id: lint, type: script, run: x}
          - {id: test, type: script, run: x, needs: build}
    """)
    assert check_ability(a) == []
    assert execution_order(a) == ["build", "lint", "test", "deploy"]


def test_ancestors_are_every_step_needed_directly_or_through_others() -> None:
    a = ability("""
        description: d
        steps:
          - {id: build, type: script, run: x}
          - {id: lint, type: script, run: x}
          - {id: test, type: script, run: x, needs: build}
          - {id: deploy, type: script, run: x, needs: test}
    """)
    assert ancestors(a, "deploy") == {"test", "build"}
    assert ancestors(a, "build") == set()


async def test_a_condition_nested_too_deep_is_a_diagnostic_and_the_other_files_still_list(client: Client, root):
    (root / "abilities" / "good.yaml").write_text("description: d\nsteps: [{id: a, type: script, run: x}]\n")
    deep = root / "abilities" / "deep.yaml"
    condition = "(" * 400 + "true" + ")" * 400
    deep.write_text(f"description: d\nsteps: [{{id: a, type: script, run: x, when: '{condition}'}}]\n")
    result = await client.call_tool("ability_list", {})
    assert not result.is_error, result.content
    assert {a["name"]: a["valid"] for a in result.structured_content["abilities"]}["good"] is True
    assert all(e["path"] == "steps[0].when" for e in await errors_of(client, deep))
