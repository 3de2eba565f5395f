"""``python -m pubsubml.cli.registry serve|migrate``: the registry service's commands alone.

The same commands as ``pubsubml registry serve|migrate``, without loading the other command groups
(the experiments, torch, the plotting stack): a registry replica starts in a fraction of the time.
"""

from __future__ import annotations

from pubsubml.cli.registry.server import registry_app

if __name__ == "__main__":
    registry_app()
