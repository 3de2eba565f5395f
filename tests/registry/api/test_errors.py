"""Tests of pubsubml.registry.api.errors: the JSON error answers, their status codes and codes,
and the NUL-byte guard."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field
from sqlalchemy.exc import DataError, StatementError

from pubsubml import errors
from pubsubml.registry.api.errors import ERROR_CODES, error_response, install_error_handlers


class Body(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int = Field(ge=0)
    g: int = Field(ge=0)


class _Unmapped(errors.PubsubmlError):
    """A library error with no HTTP mapping."""


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    raised: dict[str, Exception] = {}
    app.state.raised = raised

    @app.get("/raise/{name}")
    def raise_it(name: str) -> None:
        raise raised[name]

    @app.get("/echo")
    def echo(q: int = 0) -> dict[str, int]:
        return {"q": q}

    @app.post("/body")
    def body(payload: Body) -> dict[str, int]:
        return {"a": payload.a}

    @app.get("/model")
    def model() -> None:
        Body.model_validate({"a": "x"})

    return app


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return _app()


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _raise(app: FastAPI, client: TestClient, exc: Exception) -> httpx.Response:
    app.state.raised["x"] = exc
    return client.get("/raise/x")


@pytest.mark.parametrize(("cls", "status", "code"), ERROR_CODES, ids=lambda v: str(v))
def test_each_library_error_gets_its_status_and_code(
    app: FastAPI, client: TestClient, cls: type[errors.PubsubmlError], status: int, code: str
) -> None:
    r = _raise(app, client, cls("what went wrong"))

    assert r.status_code == status
    assert r.json() == {"error": code, "detail": "what went wrong"}


def test_no_mapping_is_shadowed_by_an_earlier_superclass() -> None:
    for i, (later, _, code) in enumerate(ERROR_CODES):
        for earlier, _, earlier_code in ERROR_CODES[:i]:
            assert not issubclass(later, earlier), (code, earlier_code)


def test_codes_are_unique_so_clients_can_map_them_back() -> None:
    codes = [code for _, _, code in ERROR_CODES]

    assert len(codes) == len(set(codes))
    assert all(400 <= status < 600 for _, status, _ in ERROR_CODES)


class _NarrowMismatch(errors.SchemaMismatchError):
    """A subclass of a mapped error that the table does not name."""


class _NarrowSignature(errors.SignatureError):
    """A subclass of a mapped error that the table does not name."""


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (_NarrowMismatch("x"), 422, "schema_mismatch"),
        (_NarrowSignature("x"), 422, "invalid_signature"),
        (errors.UnknownAccountantError("x"), 500, "internal_error"),
    ],
)
def test_unnamed_subclasses_take_the_code_of_their_nearest_mapped_class(
    app: FastAPI, client: TestClient, exc: Exception, status: int, code: str
) -> None:
    r = _raise(app, client, exc)

    assert (r.status_code, r.json()["error"]) == (status, code)


def test_unauthenticated_answers_ask_for_a_bearer_token(app: FastAPI, client: TestClient) -> None:
    r = _raise(app, client, errors.AuthenticationError("who are you"))

    assert r.headers["www-authenticate"] == "Bearer"
    assert "retry-after" not in r.headers


def test_busy_answers_ask_to_retry(app: FastAPI, client: TestClient) -> None:
    r = _raise(app, client, errors.ServiceBusyError("later"))

    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert "www-authenticate" not in r.headers


def test_an_unmapped_library_error_is_an_internal_error(app: FastAPI, client: TestClient) -> None:
    r = _raise(app, client, _Unmapped("odd"))

    assert r.status_code == 500
    assert r.json() == {"error": "internal_error", "detail": "_Unmapped: odd"}


def test_an_unexpected_exception_is_an_internal_error_without_its_message(
    app: FastAPI, client: TestClient
) -> None:
    r = _raise(app, client, KeyError("secret-internal-detail"))

    assert r.status_code == 500
    body = r.json()
    assert body["error"] == "internal_error" and "KeyError" in body["detail"]
    assert "secret-internal-detail" not in body["detail"]
    assert "nothing was changed" in body["detail"]


def test_request_validation_lists_every_field_and_summarizes_five(client: TestClient) -> None:
    r = client.post("/body", json={"f": -1, "g": -1})

    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "validation_error"
    assert [e["loc"] for e in body["errors"]] == [["body", k] for k in "abcdefg"]
    assert {e["type"] for e in body["errors"]} == {"missing", "greater_than_equal"}
    summary = body["detail"].removeprefix("invalid request: ").split("; ")
    assert [part.split(":")[0] for part in summary] == ["a", "b", "c", "d", "e"]


def test_query_validation_names_the_location(client: TestClient) -> None:
    r = client.get("/echo", params={"q": "x"})

    assert r.status_code == 422
    assert r.json()["detail"].startswith("invalid request: query.q: ")
    assert client.get("/echo", params={"q": "3"}).json() == {"q": 3}


def test_a_pydantic_error_inside_a_route_is_a_validation_error(client: TestClient) -> None:
    r = client.get("/model")

    assert r.status_code == 422 and r.json()["error"] == "validation_error"
    assert len(r.json()["errors"]) == 7


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, "unauthenticated"), (403, "forbidden"), (404, "not_found"), (418, "http_error")],
)
def test_http_exceptions_keep_their_status(
    app: FastAPI, client: TestClient, status: int, code: str
) -> None:
    r = _raise(app, client, HTTPException(status, detail="as raised"))

    assert r.status_code == status
    assert r.json() == {"error": code, "detail": "as raised"}


def test_unknown_routes_and_methods(client: TestClient) -> None:
    missing = client.get("/nowhere")
    wrong = client.delete("/echo")

    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    assert (wrong.status_code, wrong.json()["error"]) == (405, "method_not_allowed")


@pytest.mark.parametrize(
    "orig",
    [OverflowError("Python int too large to convert to SQLite INTEGER"), ValueError("bad\nmore")],
)
def test_values_the_database_refuses_are_bad_input(
    app: FastAPI, client: TestClient, orig: Exception
) -> None:
    r = _raise(app, client, StatementError("stmt", "SELECT 1", {}, orig))

    assert r.status_code == 422
    detail = r.json()["detail"]
    assert r.json()["error"] == "validation_error"
    assert detail.endswith(f"({str(orig).splitlines()[0]})") and "\n" not in detail


def test_a_data_error_is_bad_input(app: FastAPI, client: TestClient) -> None:
    exc = DataError("INSERT", {}, Exception("invalid byte sequence for encoding"))

    r = _raise(app, client, exc)

    assert r.status_code == 422
    assert "invalid byte sequence" in r.json()["detail"]


def test_other_statement_errors_are_internal(app: FastAPI, client: TestClient) -> None:
    r = _raise(app, client, StatementError("stmt", "SELECT 1", {}, RuntimeError("lost")))

    assert r.status_code == 500
    assert r.json()["error"] == "internal_error"


@pytest.mark.parametrize(
    "url", ["/echo%00", "/raise/a%00b", "/echo?q=%00", "/echo?x=a%00", "/echo?x=%00&q=1"]
)
def test_nul_bytes_in_path_or_query_are_refused(client: TestClient, url: str) -> None:
    r = client.get(url)

    assert r.status_code == 422
    assert r.json() == {
        "error": "validation_error",
        "detail": "invalid request: NUL bytes are not allowed",
    }


def test_requests_without_nul_bytes_pass_the_guard(client: TestClient) -> None:
    assert client.get("/echo?q=100").json() == {"q": 100}
    assert client.get("/echo", params={"q": "7", "x": "%2500"}).json() == {"q": 7}


def test_error_response_carries_extra_fields() -> None:
    r = error_response(409, "conflict", "taken", hint="rename")

    assert r.status_code == 409
    assert r.body == b'{"error":"conflict","detail":"taken","hint":"rename"}'
    assert "www-authenticate" not in r.headers and "retry-after" not in r.headers
