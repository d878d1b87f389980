"""The local page (`abilities-mcp ui`): runs live, a run's timeline, an ability as a graph, what waits for a person
and their answer, the skills and the prerequisites; served on 127.0.0.1 to the person who holds the login link."""
