"""A registry server whose publish transactions hang just before COMMIT (crash tests).

Run as ``python hanging_server.py DB_URL STORE PORT MARKER`` (STORE: a folder, or ``database``).  Built with ``create_app`` and
``dependency_overrides`` (no patching): the overriding database writes ``MARKER`` and sleeps when a
write transaction is about to commit a new model, so the test can SIGKILL the process there.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pubsubml.registry.api.deps import get_database
from pubsubml.registry.app import create_app
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.settings import RegistrySettings
from pubsubml.registry.tables import ModelRow


class HangingDatabase(Database):
    """Sleeps before committing any transaction that inserted a model."""

    def __init__(self, url: str, marker: Path) -> None:
        super().__init__(url)
        self.marker = marker

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[Session]:
        with super().write(durable=durable) as session:
            before = session.execute(select(func.count()).select_from(ModelRow)).scalar_one()
            yield session
            session.flush()
            after = session.execute(select(func.count()).select_from(ModelRow)).scalar_one()
            if after > before:
                self.marker.write_text("about to commit")
                time.sleep(600)


def main() -> None:
    url, store, port, marker = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    in_database = store == "database"
    settings = RegistrySettings(
        database_url=url,
        store_dir=Path(marker).parent / "unused-store" if in_database else Path(store),
        artifact_store="database" if in_database else "files",
        admin_token=os.environ["PUBSUBML_ADMIN_TOKEN"],
    )
    db = HangingDatabase(url, marker)
    app = create_app(settings, database=db)
    app.dependency_overrides[get_database] = lambda: db
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
