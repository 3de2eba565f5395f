"""``python -m pubsubml`` runs the command line."""

from __future__ import annotations

from pubsubml.cli.commands import main

main()
