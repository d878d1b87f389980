"""An ability's steps drawn as an SVG graph (ui/graph.py): well-formed XML whose nodes, edges and labels say what the
definition says, for sound files, broken ones and hostile ones alike."""

from __future__ import annotations

import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from abilities_mcp.abilities.loader import load_definition
from abilities_mcp.ui.graph import NODE_H, NODE_W, STATUS_COLORS, ability_svg
from support import REPO

SVG = "{http://www.w3.org/2000/svg}"
ABILITY_FILES = sorted((REPO / "abilities").rglob("*.yaml"))


def draw(text: str, problems=(), **options) -> ET.Element:
    """The svg for an ability written as YAML, parsed: it must be well-formed."""
    return ET.fromstring(ability_svg(yaml.safe_load(textwrap.dedent(text)), problems, **options))


def node_list(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]


def nodes(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-step"): g for g in node_list(root)}


def edges(root: ET.Element, kind: str = "") -> set[tuple[str, str]]:
    found = set()
    for path in root.iter(f"{SVG}path"):
        classes = path.get("class", "").split()
        if "edge" in classes and (not kind or kind in classes):
            found.add((path.get("data-from"), path.get("data-to")))
    return found


def place(g: ET.Element) -> tuple[float, float]:
    x, y = re.fullmatch(r"translate\(([-\d.e+]+),([-\d.e+]+)\)", g.get("transform")).groups()
    return float(x), float(y)


def title(g: ET.Element) -> str:
    return g.find(f"{SVG}title").text


def texts(g: ET.Element) -> str:
    return " ".join("".join(t.itertext()) for t in g.iter(f"{SVG}text"))


DEPLOY = """
    name: deploy/production
    description: Deploy
    steps:
      - {id: setup, type: workflow, workflow: setup-environment}
      - {id: test, type: script, run: make test, needs: setup, on_failure: retry, max_retries: 2}
      - {id: review, type: agent, agent: reviewer, prompt: Review it, needs: [test]}
      - {id: docs, type: skill, skill: docs-writer}
      - {id: approve, type: approval, prompt: "Ship?", needs: [review], when: 'inputs.environment == "production"'}
      - {id: deploy, type: script, run: make deploy, needs: [approve, docs]}
"""

PARALLEL = """
    description: Fan out and in
    settings: {parallel: true}
    steps:
      - {id: fetch, type: script, run: x}
      - {id: lint, type: script, run: x, needs: fetch}
      - {id: unit, type: script, run: x, needs: fetch}
      - {id: e2e, type: script, run: x, needs: fetch}
      - {id: report, type: script, run: x, needs: [lint, unit, e2e]}
      - {id: alone, type: script, run: x}
"""


def test_every_step_is_a_focusable_node_with_its_type_and_a_title() -> None:
    drawn = nodes(draw(DEPLOY))

    assert {sid: g.get("data-type") for sid, g in drawn.items()} == {
        "setup": "workflow",
        "test": "script",
        "review": "agent",
        "docs": "skill",
        "approve": "approval",
        "deploy": "script",
    }
    review = drawn["review"]
    assert (review.get("tabindex"), review.get("role")) == ("0", "group")
    assert review.get("aria-label") == "step review: agent"
    assert title(review).startswith("review — agent · reviewer")
    assert "agent · reviewer" in texts(review)


def test_needs_are_edges_from_the_step_needed_to_the_step_that_needs_it() -> None:
    assert edges(draw(DEPLOY), "needs") == {
        ("setup", "test"),
        ("test", "review"),
        ("review", "approve"),
        ("approve", "deploy"),
        ("docs", "deploy"),
    }


def test_one_at_a_time_a_step_without_needs_follows_the_step_before_it_in_run_order() -> None:
    root = draw(DEPLOY)

    # Run order: setup, test, review, docs (the first ready in file order after review), approve, deploy.
    assert edges(root, "then") == {("review", "docs")}
    drawn = nodes(root)
    numbers = {sid: texts(g).split(".")[0] for sid, g in drawn.items()}
    assert numbers == {"setup": "1", "test": "2", "review": "3", "docs": "4", "approve": "5", "deploy": "6"}
    assert place(drawn["docs"])[1] > place(drawn["review"])[1]


def test_in_parallel_independent_steps_sit_side_by_side_in_one_layer() -> None:
    root = draw(PARALLEL)
    drawn = nodes(root)
    y = {sid: place(g)[1] for sid, g in drawn.items()}

    assert y["fetch"] == y["alone"] < y["lint"] == y["unit"] == y["e2e"] < y["report"]
    assert place(drawn["lint"])[0] < place(drawn["unit"])[0] < place(drawn["e2e"])[0]  # in file order
    assert edges(root, "then") == set()
    assert not re.match(r"\d", texts(drawn["lint"]))  # no run-order numbers: the order is not fixed


def test_a_step_sits_below_every_step_it_needs_by_the_longest_path() -> None:
    drawn = nodes(
        draw(
            """
            description: x
            settings: {parallel: true}
            steps:
              - {id: a, type: script, run: x}
              - {id: b, type: script, run: x, needs: a}
              - {id: c, type: script, run: x, needs: b}
              - {id: d, type: script, run: x, needs: [a, c]}
            """
        )
    )

    ys = [place(drawn[s])[1] for s in "abcd"]
    assert ys == sorted(set(ys))


def test_an_approval_is_a_hexagon() -> None:
    shape = nodes(draw(DEPLOY))["approve"].find(f"{SVG}polygon")

    assert shape is not None
    assert len(shape.get("points").split()) == 6


def test_a_nested_ability_shows_its_name_with_a_link_and_a_double_border() -> None:
    setup = nodes(draw(DEPLOY, link=lambda name: f"/abilities/{name}"))["setup"]

    [anchor] = list(setup.iter(f"{SVG}a"))
    assert anchor.get("href") == "/abilities/setup-environment"
    assert "setup-environment" in texts(anchor)
    assert len(setup.findall(f"{SVG}rect")) == 2


def test_a_link_that_would_run_code_is_left_out() -> None:
    setup = nodes(draw(DEPLOY, link=lambda name: f" JaVa\tscript:alert('{name}')"))["setup"]

    assert list(setup.iter(f"{SVG}a")) == []
    assert "setup-environment" in texts(setup)


def test_a_when_condition_is_a_label_on_its_step() -> None:
    approve = nodes(draw(DEPLOY))["approve"]

    [when] = [t for t in approve.iter(f"{SVG}text") if t.get("class") == "when"]
    assert when.text == 'if inputs.environment == "production"'


@pytest.mark.parametrize(
    ("settings", "step", "badge"),
    [
        ("{}", "on_failure: retry, max_retries: 2", "retry ×2"),
        ("{}", "on_failure: retry", "retry"),
        ("{}", "on_failure: ask", "ask"),
        ("{on_failure: continue}", "", "continue"),
        ("{on_failure: continue}", "on_failure: stop", None),
        ("{}", "", None),
    ],
    ids=["retry-twice", "retry-once", "ask", "continue-from-settings", "stop-overrides-settings", "default-stop"],
)
def test_on_failure_shows_as_a_badge(settings: str, step: str, badge: str | None) -> None:
    fields = f", {step}" if step else ""
    drawn = nodes(draw(f"description: x\nsettings: {settings}\nsteps:\n  - {{id: a, type: script, run: x{fields}}}"))

    badges = ["".join(g.itertext()) for g in drawn["a"].iter(f"{SVG}g") if g.get("class") == "badge"]
    assert badges == ([badge] if badge else [])


PROBLEMS = [
    ("steps[1].needs[0]", "test"),
    ("steps[4]", "approve"),
    ("steps.review.when", "review"),
    ("steps[2].validation.output_matches", "review"),
]


@pytest.mark.parametrize(("path", "step"), PROBLEMS, ids=[p for p, _ in PROBLEMS])
def test_a_problem_is_marked_on_the_step_its_path_names(path: str, step: str) -> None:
    root = draw(DEPLOY, [(path, "something is wrong here")])
    drawn = nodes(root)

    marked = {sid for sid, g in drawn.items() if "problem" in g.get("class").split()}
    assert marked == {step}
    assert f"{path}: something is wrong here" in title(drawn[step])
    assert drawn[step].find(f"{SVG}*[@class='shape']").get("stroke") == "#b91c1c"
    assert drawn[step].get("aria-label").endswith(", 1 problem")
    assert root.find(f"{SVG}text[@class='problems']") is None


def test_problems_that_name_no_step_are_listed_above_the_graph() -> None:
    problems = [
        ("inputs.version.pattern", "regular expression '(' does not compile"),
        ("", "YAML does not parse at line 3"),
        ("steps", "abilities run each other in a loop a → b → a"),
        ("steps[99].run", "a step that is not there"),
        ("steps.nothing.when", "a step id that is not there"),
    ]
    root = draw(DEPLOY, problems)

    listed = root.find(f"{SVG}text[@class='problems']")
    words = " ".join(" ".join(t.text for t in listed).split())  # one tspan a line; long problems wrap
    for path, message in problems:
        assert (f"{path}: {message}" if path else message) in words
    assert not any("problem" in g.get("class").split() for g in nodes(root).values())
    last_line = float(listed.get("y")) + 16 * (len(listed.findall(f"{SVG}tspan")) - 1)
    assert last_line < min(place(g)[1] for g in nodes(root).values())


def test_a_need_naming_no_step_is_a_dashed_red_edge_from_a_missing_ghost() -> None:
    root = draw(
        """
        description: x
        steps:
          - {id: build, type: script, run: x}
          - {id: test, type: script, run: x, needs: [build, biuld]}
          - {id: lint, type: script, run: x, needs: biuld}
        """
    )

    [ghost] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "ghost"]
    assert ghost.get("data-missing") == "biuld"
    assert place(ghost)[1] < place(nodes(root)["test"])[1]
    assert edges(root, "missing") == {("biuld", "test"), ("biuld", "lint")}
    missing = [p for p in root.iter(f"{SVG}path") if "missing" in p.get("class", "").split()]
    assert all(p.get("stroke-dasharray") and p.get("stroke") == "#b91c1c" for p in missing)
    assert edges(root, "needs") == {("build", "test")}


@pytest.mark.parametrize(
    ("steps", "cycle", "outside"),
    [
        (
            "[{id: a, type: script, run: x, needs: b}, {id: b, type: script, run: x, needs: a}]",
            {("b", "a"), ("a", "b")},
            set(),
        ),
        ("[{id: a, type: script, run: x, needs: a}]", {("a", "a")}, set()),
        (
            "[{id: a, type: script, run: x, needs: c}, {id: b, type: script, run: x, needs: a},"
            " {id: c, type: script, run: x, needs: b}, {id: d, type: script, run: x, needs: c}]",
            {("c", "a"), ("a", "b"), ("b", "c")},
            {("c", "d")},
        ),
    ],
    ids=["two-steps", "a-step-needing-itself", "three-steps-and-one-after"],
)
def test_a_cycle_is_drawn_with_its_edges_marked(steps: str, cycle: set, outside: set) -> None:
    root = draw(f"description: x\nsteps: {steps}")

    assert edges(root, "cycle") == cycle
    assert edges(root, "needs") - edges(root, "cycle") == outside
    assert len(nodes(root)) == len({s for edge in cycle | outside for s in edge})


def test_a_long_ring_of_needs_draws_without_hanging_or_recursing() -> None:
    count = 3000  # deeper than Python's recursion limit
    steps = [{"id": f"s{i}", "type": "script", "run": "x", "needs": [f"s{(i - 1) % count}"]} for i in range(count)]

    root = ET.fromstring(ability_svg({"description": "ring", "steps": steps}))

    assert len(edges(root, "cycle")) == count
    assert len({place(g)[1] for g in nodes(root).values()}) == count  # one step a layer, as the ring runs


HOSTILE = "</svg><script>alert(1)</script><svg onload=alert(2)>"


def test_text_from_the_file_comes_out_inert() -> None:
    definition = {
        "name": HOSTILE,
        "description": HOSTILE,
        "steps": [
            {"id": HOSTILE, "type": "script", "run": HOSTILE, "when": HOSTILE, "description": "a\x00b\x1bc"},
            {"id": "b", "type": HOSTILE, "needs": [HOSTILE, "<x>"]},
            {"id": "c", "type": "workflow", "workflow": HOSTILE},
        ],
    }
    svg = ability_svg(definition, [(HOSTILE, HOSTILE), ("steps[0].when", HOSTILE)], status={"b": HOSTILE})
    root = ET.fromstring(svg)

    tags = {el.tag.removeprefix(SVG) for el in root.iter()}
    assert "script" not in tags and all(
        t in {"svg", "title", "desc", "defs", "marker", "path", "text", "tspan", "g", "rect", "polygon", "circle"}
        for t in tags
    )
    assert not any(name.startswith("on") for el in root.iter() for name in el.attrib)
    assert root.find(f"{SVG}title").text == f"Steps of {HOSTILE}"
    assert HOSTILE in title(nodes(root)[HOSTILE])
    assert edges(root, "needs") == {(HOSTILE, "b")}
    assert "a\ufffdb\ufffdc" in title(nodes(root)[HOSTILE])


def test_a_running_picture_colors_each_step_by_its_status() -> None:
    status = {"setup": "completed", "test": "failed", "review": "running", "docs": "skipped", "approve": "awaiting"}
    drawn = nodes(draw(DEPLOY, status=status))

    for sid, state in status.items():
        g = drawn[sid]
        assert f"status-{state}" in g.get("class").split()
        assert g.get("aria-label").endswith(f", {state}")
        assert g.find(f"{SVG}*[@class='shape']").get("fill") == STATUS_COLORS[state][0]
        assert state in texts(g)
    assert not any(c.startswith("status-") for c in drawn["deploy"].get("class").split())


def test_a_runs_awaiting_states_share_the_awaiting_color() -> None:
    drawn = nodes(draw(DEPLOY, status={"review": "awaiting_agent"}))

    assert "status-awaiting" in drawn["review"].get("class").split()
    assert drawn["review"].find(f"{SVG}*[@class='shape']").get("fill") == STATUS_COLORS["awaiting"][0]


def test_screen_readers_get_a_title_and_the_steps_in_run_order() -> None:
    root = draw(DEPLOY)

    assert root.get("role") == "img"
    labelled = {el.get("id"): el for el in root.iter() if el.get("id")}
    parts = [labelled[i] for i in root.get("aria-labelledby").split()]
    assert [p.tag for p in parts] == [f"{SVG}title", f"{SVG}desc"]
    assert parts[0].text == "Steps of deploy/production"
    desc = parts[1].text
    assert desc.startswith("6 steps, run one at a time in this order:")
    positions = [
        desc.index(f"{n}. {sid},") for n, sid in enumerate(["setup", "test", "review", "docs", "approve", "deploy"], 1)
    ]
    assert positions == sorted(positions)
    assert 'approve, approval; if inputs.environment == "production"; needs review.' in desc


def test_colors_are_presentation_attributes_not_css_the_page_policy_blocks() -> None:
    root = draw(DEPLOY, [("steps[1]", "x"), ("", "y")], status={"test": "failed"}, link=lambda n: "/a")

    assert not any("style" in el.attrib for el in root.iter())
    assert root.find(f".//{SVG}style") is None


def test_the_view_box_holds_every_node_and_edge() -> None:
    root = draw(PARALLEL, [("", "a problem for the list above")])
    left, top, width, height = map(float, root.get("viewBox").split())

    for g in [*nodes(root).values()]:
        x, y = place(g)
        assert left <= x and x + NODE_W <= left + width and top <= y and y + NODE_H <= top + height
    for path in root.iter(f"{SVG}path"):
        for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", path.get("d")):
            assert left <= float(x) <= left + width and top <= float(y) <= top + height


def test_a_need_that_skips_layers_runs_beside_the_steps_between_not_through_them() -> None:
    root = ET.fromstring(ability_svg(yaml.safe_load((REPO / "abilities/release/checklist.yaml").read_text())))
    drawn = nodes(root)

    [path] = [p for p in root.iter(f"{SVG}path") if (p.get("data-from"), p.get("data-to")) == ("clean-tree", "summary")]
    xs = [float(x) for x, _ in re.findall(r"(-?[\d.]+),(-?[\d.]+)", path.get("d"))]
    assert max(xs) > max(place(g)[0] + NODE_W for g in drawn.values())


@pytest.mark.parametrize(
    "definition",
    [
        {},
        {"steps": "build"},
        {"steps": []},
        {"steps": ["build", 3, None, {"id": None}]},
        {"steps": [{"id": "a"}, {"id": "a", "type": "script", "needs": "a"}, {"type": "agent"}]},
        {"steps": [{"id": 5, "type": ["script"], "needs": {"x": 1}, "when": 3, "on_failure": ["retry"]}]},
        {
            "settings": "parallel",
            "steps": [{"id": "a", "type": "script", "max_retries": "many", "on_failure": "retry"}],
        },
        {
            "steps": [
                {"id": "a", "type": "workflow", "workflow": {"not": "a name"}},
                {"id": "b", "needs": [None, "", 7]},
            ]
        },
        [],
    ],
    ids=[
        "empty",
        "steps-not-a-list",
        "no-steps",
        "steps-not-mappings",
        "duplicate-ids-and-no-type",
        "values-of-the-wrong-types",
        "settings-not-a-mapping",
        "workflow-not-a-name",
        "not-a-mapping",
    ],
)
def test_a_broken_definition_draws_what_it_can_without_raising(definition) -> None:
    root = ET.fromstring(ability_svg(definition, [("steps[0]", "broken"), ("x", "y")]))

    steps = definition.get("steps") if isinstance(definition, dict) else None
    assert len(node_list(root)) == (len(steps) if isinstance(steps, list) else 0)


def test_the_real_validators_problems_land_on_their_steps(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """
        description: x
        steps:
          - {id: build, type: script, run: x}
          - {id: test, type: script, run: x, needs: [biuld]}
          - {id: ship, type: scrpit, run: x}
          - {id: gate, type: approval, prompt: ok, when: inputs.nope == 1}
        """
    )
    path = tmp_path / "x.yaml"
    path.write_text(text)
    problems = [(d.path, d.message) for d in load_definition(path, "x", "project").diagnostics]

    drawn = nodes(ET.fromstring(ability_svg(yaml.safe_load(text), problems)))

    assert {sid for sid, g in drawn.items() if "problem" in g.get("class").split()} == {"test", "ship", "gate"}
    assert "unknown step 'biuld'" in title(drawn["test"])
    assert drawn["ship"].get("data-type") == "unknown"


@pytest.mark.parametrize("path", ABILITY_FILES, ids=[str(p.relative_to(REPO / "abilities")) for p in ABILITY_FILES])
def test_the_repositorys_own_abilities_draw(path: Path) -> None:
    definition = yaml.safe_load(path.read_text())

    root = ET.fromstring(ability_svg(definition, name=str(path.relative_to(REPO / "abilities").with_suffix(""))))

    drawn = nodes(root)
    assert [(sid, g.get("data-type")) for sid, g in drawn.items()] == [
        (s["id"], s["type"]) for s in definition["steps"]
    ]
    declared = {
        (need, s["id"])
        for s in definition["steps"]
        for need in ([s["needs"]] if isinstance(s.get("needs"), str) else s.get("needs", []))
    }
    assert edges(root, "needs") == declared
    assert not edges(root, "cycle") and not edges(root, "missing")


def test_two_hundred_steps_draw() -> None:
    steps = [
        {"id": f"s{i}", "type": "script", "run": "x", "needs": [f"s{j}" for j in range(max(0, i - 4), i, 2)]}
        for i in range(200)
    ]

    root = ET.fromstring(ability_svg({"description": "big", "settings": {"parallel": True}, "steps": steps}))

    assert len(nodes(root)) == 200
