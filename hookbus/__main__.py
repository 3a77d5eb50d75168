"""``python -m hookbus`` runs the CLI."""

from hookbus.cli import main

main()
