from mcp import Client


async def test_a_script_ability_runs_to_completion_through_the_client(client: Client, write) -> None:
    write(
        "hello",
        """
        description: say hello
        steps:
          - {id: greet, type: script, run: echo hello}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "hello"})
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "completed"
    assert result.structured_content["steps"][0]["output"] == "hello"
