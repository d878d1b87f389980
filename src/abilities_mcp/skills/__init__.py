"""Agent Skills: SKILL.md parsed and validated, the project's skill set, and routing a task to skills."""
