"""A data owner of Algorithm 1 as an HTTP client (httpx) of the learner on 127.0.0.1.

The owner reads its data from a file only its own process opens, registers n_i, then posts a
request each time its rate-1 Poisson clock fires (exponential waits of ``clock_unit_s`` seconds).
To a query θ̂_k it answers with :meth:`~pubsubml.methods.async_dp.learner.DataOwner.answer`, the
Laplace-noised gradient of Eq. 4, charged to the owner's own ledger before it leaves; or it refuses
the query: for good once its T answers are spent, once if θ̂_k lies outside Θ (nothing charged).

References
----------
async-dp-cost-of-privacy.txt §3 (Poisson clocks, Eq. 4, Theorem 1, Algorithm 1 lines 3–6).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import numpy as np

from pubsubml.errors import DataValidationError, PrivacyBudgetExceededError
from pubsubml.methods.async_dp.learner import DataOwner
from pubsubml.methods.async_dp.peers_protocol import (
    LOOPBACK,
    AnswerMessage,
    PeerMessage,
    RefuseMessage,
    RegisterMessage,
    RequestMessage,
)

__all__ = ["learner_client", "post", "run_owner"]


def learner_client(url: str, timeout_s: float = 5.0) -> httpx.Client:
    """An HTTP client of the learner at ``url``, which must be ``http://127.0.0.1:<port>``.

    Proxy settings of the environment are ignored (``trust_env=False``), so no request can leave
    the loopback interface through a proxy.

    Raises
    ------
    DataValidationError
        If ``url`` is anywhere else.
    """
    base = httpx.URL(url)
    if base.scheme != "http" or base.host != LOOPBACK or base.port is None:
        raise DataValidationError(f"the learner must be at http://{LOOPBACK}:<port>, not {url!r}")
    return httpx.Client(base_url=base, timeout=timeout_s, trust_env=False)


def post(learner: httpx.Client, message: PeerMessage) -> dict[str, Any]:
    """Post ``message`` to its path; a 4xx/5xx reply comes back with ``status="error"``.

    Raises
    ------
    httpx.TransportError
        If the learner cannot be reached (gone, or slower than the client's timeout).
    """
    response = learner.post(message.path, json=message.model_dump())
    try:
        reply = dict(response.json())
    except (ValueError, TypeError):  # not a JSON object
        reply = {"detail": response.text}
    if response.is_error:  # the learner refused this message: report and go on
        reply["status"] = "error"
    return reply


def _answer_queries(
    learner: httpx.Client, owner: DataOwner, cfg: dict[str, Any], deadline: float
) -> str:
    """Algorithm 1 on the owner's side, until done, refused for good, or the deadline."""
    me = cfg["owner"]
    clock = np.random.default_rng(cfg["seed"] + 1)
    post(learner, RegisterMessage(owner=me, n_records=owner.n_records))
    while time.monotonic() < deadline:
        time.sleep(clock.exponential(cfg["clock_unit_s"]))  # this owner's Poisson clock
        reply = post(learner, RequestMessage(owner=me))
        if reply["status"] == "done":
            return "done"
        if reply["status"] != "query":
            continue
        try:
            gradient = owner.answer(reply["theta"]).tolist()
        except PrivacyBudgetExceededError:
            post(learner, RefuseMessage(owner=me, ticket=reply["ticket"]))
            return "refused"
        except DataValidationError:  # a query outside Θ: refuse it, nothing was charged
            post(learner, RefuseMessage(owner=me, ticket=reply["ticket"]))
            continue
        post(learner, AnswerMessage(owner=me, ticket=reply["ticket"], gradient=gradient))
    return "refused"


def run_owner(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run data owner i against the learner at ``cfg["url"]`` until done, refused or deadline.

    Parameters
    ----------
    cfg : dict
        ``owner`` (i), ``data_path`` (``.npz`` with ``X`` and ``y``, read with
        ``allow_pickle=False``), ``epsilon``, ``horizon``, ``clip_norm``, ``theta_max``, ``seed``,
        ``url``, ``clock_unit_s`` and ``deadline_s``.

    Returns
    -------
    dict
        ``answers`` (k_i), ``spent_epsilon`` (k_i·ε_i/T) and ``status``: ``"done"``,
        ``"refused"`` (budget spent, or deadline) or ``"learner gone"``.
    """
    with np.load(cfg["data_path"], allow_pickle=False) as data:  # never allow pickles here
        X, y = data["X"], data["y"]
    owner = DataOwner(
        site=f"owner{cfg['owner']}",
        X=X,
        y=y,
        epsilon=cfg["epsilon"],
        horizon=cfg["horizon"],
        clip_norm=cfg["clip_norm"],
        theta_max=cfg["theta_max"],
        rng=np.random.default_rng(cfg["seed"]),
    )
    deadline = time.monotonic() + cfg["deadline_s"]
    try:
        with learner_client(cfg["url"]) as learner:
            status = _answer_queries(learner, owner, cfg, deadline)
    except (httpx.TransportError, OSError):
        status = "learner gone"
    return {
        "answers": owner.answers_given,
        "spent_epsilon": owner.spent_epsilon(),
        "status": status,
    }
