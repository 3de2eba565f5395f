"""``/v1/features``: the consortium's feature dictionary (pubsub-ml.txt §3.2)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from pubsubml.registry.api.deps import DatabaseDep, NotifierDep, PrincipalDep
from pubsubml.registry.schemas import FeatureList
from pubsubml.registry.services import features as service

__all__ = ["router"]

router = APIRouter(prefix="/features", tags=["features"])


@router.post(
    "",
    response_model=FeatureList,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": FeatureList, "description": "Nothing new: identical re-adds."}},
)
def add_features(
    body: FeatureList,
    principal: PrincipalDep,
    db: DatabaseDep,
    notifier: NotifierDep,
    response: Response,
) -> FeatureList:
    """Add features (administrator); identical re-adds are no-ops, redefinitions are refused."""
    with db.write() as session:
        added = service.add_features(session, principal, body.features)
    if not added:
        response.status_code = status.HTTP_200_OK
    notifier.notify()
    return FeatureList(features=added)


@router.get("", response_model=FeatureList)
def list_features(principal: PrincipalDep, db: DatabaseDep) -> FeatureList:
    """The whole dictionary."""
    with db.read() as session:
        return FeatureList(features=service.list_features(session))
