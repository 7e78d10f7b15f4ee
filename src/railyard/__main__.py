"""``python -m railyard`` runs the CLI."""

from railyard.cli.main import app

app(prog_name="railyard")
