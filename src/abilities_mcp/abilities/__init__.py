"""Abilities: the YAML format, loading and checking one file, and the project's catalog of them."""
