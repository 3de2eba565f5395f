"""The demo's registry: the registry app served on loopback in a background thread.

SQLite in WAL mode and a local artifact folder in the demo's folder (:mod:`pubsubml.cli.demo`);
research mode (seeded DP noise accepted) for the simulations only.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["embedded_registry"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def embedded_registry(root: Path, admin_token: str, *, allow_seeded_noise: bool) -> Iterator[str]:
    """An embedded registry served by uvicorn on 127.0.0.1 in a background thread.

    ``allow_seeded_noise`` starts it in research mode (simulations only).
    """
    import uvicorn

    from pubsubml.registry.app import create_app
    from pubsubml.registry.infrastructure.database import Database
    from pubsubml.registry.migrate import check_schema, upgrade
    from pubsubml.registry.settings import RegistrySettings

    settings = RegistrySettings(
        database_url=f"sqlite:///{root / 'registry.db'}",
        store_dir=root / "store",
        admin_token=admin_token,  # type: ignore[arg-type]
        long_poll_max_seconds=5.0,
        allow_seeded_noise=allow_seeded_noise,
    )
    database = Database(settings.database_url)
    upgrade(database)
    check_schema(database)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, database=database),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, name="pubsubml-registry", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the embedded registry did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        database.dispose()
