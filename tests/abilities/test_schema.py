"""The JSON Schema editors use is generated from the models and shipped in sync with them."""

import json

from abilities_mcp.abilities.models import Ability
from support import REPO


def test_the_shipped_schema_file_matches_the_models() -> None:
    shipped = json.loads((REPO / "schema" / "ability.schema.json").read_text())
    generated = Ability.model_json_schema(by_alias=True)
    assert {k: v for k, v in shipped.items() if k != "$schema"} == generated, (
        "schema/ability.schema.json is stale: run `abilities-mcp schema ability > schema/ability.schema.json`"
    )


def test_the_schema_refuses_unknown_keys_and_knows_every_step_type() -> None:
    schema = Ability.model_json_schema(by_alias=True)
    assert schema["additionalProperties"] is False
    steps = schema["properties"]["steps"]["items"]
    assert set(steps["discriminator"]["mapping"]) == {"script", "agent", "skill", "approval", "workflow"}
    for name in ("ScriptStep", "AgentStep", "InputSpec", "Settings"):
        assert schema["$defs"][name]["additionalProperties"] is False
