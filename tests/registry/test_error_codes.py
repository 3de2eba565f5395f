"""The error-code table is shared by the service and the client and loads without either's
framework."""

from __future__ import annotations

import subprocess
import sys

from pubsubml.errors import PubsubmlError
from pubsubml.registry.api import errors as api_errors
from pubsubml.registry.error_codes import ERROR_CODES


def test_the_service_answers_with_the_same_table() -> None:
    assert api_errors.ERROR_CODES is ERROR_CODES
    assert all(issubclass(cls, PubsubmlError) for cls, _, _ in ERROR_CODES)
    assert all(400 <= status < 600 for _, status, _ in ERROR_CODES)


def test_the_table_loads_without_the_web_framework_or_the_database_layer() -> None:
    code = (
        "import sys\nimport pubsubml.registry.error_codes\n"
        "print(sorted(m for m in ('fastapi', 'starlette', 'sqlalchemy') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
