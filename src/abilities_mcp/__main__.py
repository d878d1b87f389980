"""`python -m abilities_mcp` is the `abilities-mcp` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
