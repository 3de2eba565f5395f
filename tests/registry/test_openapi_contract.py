"""The live app against its own OpenAPI document: generated requests (valid and invalid), as the
administrator and as a site, get no server error and responses that conform to the document —
status codes, content types, headers and bodies, 4xx bodies included (schemathesis)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

pytestmark = pytest.mark.slow


@pytest.fixture
def contract_registry(registry_factory: Any) -> Any:
    """A SQLite registry with data for the generated requests to find: sites, a model, a
    subscription (short long-poll bound, so streaming and waiting calls end quickly)."""
    reg = registry_factory(long_poll_max_seconds=0.2, sse_heartbeat_seconds=0.1)
    reg.add_features()
    for name in ("a", "b"):
        reg.add_site(name)
    assert reg.publish(reg.artifacts("a", seed=120), site="a").status_code == 201
    reg.subscribe("b", "age")
    return reg


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_every_operation_conforms(contract_registry: Any) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", contract_registry.client.app)
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def conforms(case: Any) -> None:
            for headers in (contract_registry.admin, contract_registry.auth("a")):
                # Schema-valid requests may still break a business rule (a publisher without a
                # key, a feature outside the dictionary, a channel that does not parse): 422.
                case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        conforms()
        checked.append(operation.label)
    assert len(checked) >= 20, checked
