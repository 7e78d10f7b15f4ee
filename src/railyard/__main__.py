"""``python -m railyard`` runs the CLI."""

from railyard.cli.main import entry

entry()
