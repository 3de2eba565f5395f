"""``/v1/models``: publish (multipart upload), list with filters, read cards, download weights.

Models a caller may not see answer 404 exactly like ids that were never published.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import FileResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from pubsubml.errors import ServiceBusyError
from pubsubml.registry.api.deps import (
    Cursor,
    DatabaseDep,
    PrincipalDep,
    PublisherDep,
    StateDep,
    StoreDep,
)
from pubsubml.registry.api.upload import read_publish_form
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.schemas import ErrorBody, ModelList, ModelPublic
from pubsubml.registry.services import model_reads as service
from pubsubml.registry.services.publish import publish_model

__all__ = ["router"]

router = APIRouter(prefix="/models", tags=["models"])

_PUBLISH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["card", "weights"],
                    "properties": {
                        "card": {"type": "string", "description": "The signed ModelCard as JSON."},
                        "weights": {"type": "string", "format": "binary"},
                        "visible_to": {
                            "type": "string",
                            "description": "Comma-separated site names; absent: every site.",
                        },
                    },
                }
            }
        },
    }
}


@router.post(
    "",
    response_model=ModelPublic,
    status_code=status.HTTP_201_CREATED,
    openapi_extra=_PUBLISH_BODY,
    responses={
        200: {"model": ModelPublic, "description": "Already published (idempotent)."},
        409: {"model": ErrorBody, "description": "Over budget, or weights taken."},
        413: {"model": ErrorBody, "description": "Upload too large."},
        422: {"model": ErrorBody, "description": "Invalid card, weights or privacy record."},
        503: {"model": ErrorBody, "description": "At the limit of concurrent publishes; retry."},
    },
)
async def publish(
    request: Request, response: Response, principal: PublisherDep, state: StateDep
) -> ModelPublic:
    """Publish a signed model: every check passes and it is committed atomically, or nothing is.

    At most ``max_concurrent_publishes`` requests are read and checked at once; the others wait
    up to ``publish_wait_seconds``, then get 503 ``busy`` (with ``Retry-After``).
    """
    # The state's resources are read from it, not resolved as dependencies of their own: each
    # dependency costs a request a share of its time (pubsubml.registry.api.deps).
    settings, db, store = state.settings, state.database, state.store
    try:
        await asyncio.wait_for(state.publish_slots.acquire(), settings.publish_wait_seconds)
    except TimeoutError:
        raise ServiceBusyError(
            f"the registry is handling {settings.max_concurrent_publishes} publishes; nothing "
            "was published, retry"
        ) from None
    try:
        form = await read_publish_form(request, settings.max_upload_bytes)
        result = await run_in_threadpool(
            publish_model,
            db,
            store,
            principal,
            form.card,
            form.weights,
            lock=state.upload_lock,
            validator=state.validator,
            visible_to=form.visible_to,
            max_weights_bytes=settings.max_upload_bytes,
            committer=state.committer,
            allow_seeded_noise=settings.allow_seeded_noise,
        )
    finally:
        state.publish_slots.release()
    if result.created:
        state.notifier.notify()
    else:
        response.status_code = status.HTTP_200_OK
    return result


@router.get("", response_model=ModelList)
def list_models(
    principal: PrincipalDep,
    db: DatabaseDep,
    publisher: Annotated[str | None, Query(max_length=64)] = None,
    task: Annotated[str | None, Query(pattern="^(classification|regression)$")] = None,
    features: Annotated[list[str], Query(max_length=256)] = [],  # noqa: B006 - FastAPI query list
    min_epsilon: Annotated[float | None, Query(ge=0)] = None,
    max_epsilon: Annotated[float | None, Query(ge=0)] = None,
    max_delta: Annotated[float | None, Query(ge=0, le=1)] = None,
    after: Cursor = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ModelList:
    """Models the caller may see, in publication order; ``after`` pages by ``position``."""
    with db.read() as session:
        return service.list_models(
            session,
            principal,
            publisher=publisher,
            task=task,
            features=features,
            min_epsilon=min_epsilon,
            max_epsilon=max_epsilon,
            max_delta=max_delta,
            after=after,
            limit=limit,
        )


@router.get("/{model_id}", response_model=ModelPublic)
def get_model(model_id: str, principal: PrincipalDep, db: DatabaseDep) -> ModelPublic:
    """One model with its card."""
    with db.read() as session:
        return service.get_model(session, principal, model_id)


@router.get("/{model_id}/card", response_class=Response)
def get_card(model_id: str, principal: PrincipalDep, db: DatabaseDep) -> Response:
    """The signed card exactly as stored (canonical JSON)."""
    with db.read() as session:
        row, _ = service.get_model_row(session, principal, model_id)
    return Response(row.card_json, media_type="application/json")


@router.get("/{model_id}/weights", response_class=FileResponse)
def get_weights(
    model_id: str, principal: PrincipalDep, db: DatabaseDep, store: StoreDep
) -> Response:
    """The weights bytes (``X-Weights-SHA256`` carries their digest).

    From the file store the file is sent as it is; from the database store the chunks are
    streamed one statement at a time and the digest checked as they go (a mismatch ends the
    response short of its ``Content-Length``).
    """
    with db.read() as session:
        row, _ = service.get_model_row(session, principal, model_id)
    filename = f"{row.id}.{row.format}"
    headers = {"X-Weights-SHA256": row.weights_sha256, "ETag": f'"{row.weights_sha256}"'}
    if isinstance(store, ArtifactStore):
        return FileResponse(
            store.path(row.storage_key),
            media_type="application/octet-stream",
            filename=filename,
            headers=headers,
        )
    chunks = store.chunks(row.storage_key, sha256=row.weights_sha256)
    headers["Content-Length"] = str(row.size_bytes)
    headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return StreamingResponse(chunks, media_type="application/octet-stream", headers=headers)
