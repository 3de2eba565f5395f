"""Per-sample Algorithm-1 gradients: per-sample parameter copies against ``torch.func.vmap``.

Algorithm 1 (fl-domain-experts.txt §3.2) clips the per-sample gradient of the mixture loss with
respect to the general model.  :func:`pubsubml.methods.domain_experts.gate.general_gradients`
gets all of them from one backward pass through per-sample copies of the parameters; the
reference is ``vmap(grad(...))`` over ``functional_call`` (as the DP-SGD engine's generic path).
Both give the same gradients (checked here); the table gives the time per call and the ratio
(reference / ours).  One torch thread; single runs on a shared machine.

Run: ``.venv/bin/python benchmarks/domain_experts_gradients.py``.
"""

from __future__ import annotations

import functools
import itertools
import os
import platform
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from pubsubml.methods.domain_experts.gate import general_gradients, mixture_loss, mixture_output


def reference(
    general: nn.Module, private: nn.Module, gate: nn.Module, X: Tensor, y: Tensor
) -> dict[str, Tensor]:
    """Per-sample gradients of the Algorithm-1 mixture loss with torch.func."""
    params = {k: v.detach() for k, v in general.named_parameters()}
    with torch.no_grad():
        p_out, alpha = private(X), torch.sigmoid(gate(X)[:, 0])

    def loss(p: dict[str, Tensor], xi: Tensor, yi: Tensor, pi: Tensor, ai: Tensor) -> Tensor:
        out = functional_call(general, p, (xi.unsqueeze(0),))
        pred = mixture_output(out, pi.unsqueeze(0), ai.unsqueeze(0), "classification")
        return mixture_loss(pred, yi.unsqueeze(0), "classification").sum()

    out: dict[str, Tensor] = vmap(grad(loss), in_dims=(None, 0, 0, 0, 0))(
        params, X, y, p_out, alpha
    )
    return out


def timed(fn: Callable[[], object], repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'model':>14} {'batch':>6} {'ours ms':>8} {'vmap ms':>8} {'ratio':>6}")
    for hidden, batch in (((), 10), ((), 50), ((100,), 50)):
        torch.manual_seed(0)
        sizes = (10, *hidden, 2)
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.Tanh()]
        general = nn.Sequential(*layers[:-1])
        private, gate = nn.Sequential(nn.Linear(10, 2)), nn.Linear(10, 1)
        X, y = torch.rand(batch, 10), torch.randint(0, 2, (batch,))
        ours, _ = general_gradients(
            general, private, gate, X, y, algorithm=1, task="classification", max_grad_norm=None
        )
        ref = reference(general, private, gate, X, y)
        for k in ref:
            torch.testing.assert_close(ours[k], ref[k], rtol=1e-4, atol=1e-6)
        ours_call = functools.partial(
            general_gradients, general, private, gate, X, y,
            algorithm=1, task="classification", max_grad_norm=1.0,
        )  # fmt: skip
        t_ours = timed(ours_call, 200)
        t_ref = timed(functools.partial(reference, general, private, gate, X, y), 200)
        name = "linear" if not hidden else f"MLP {hidden}"
        print(
            f"{name:>14} {batch:>6} {1e3 * t_ours:>8.3f} {1e3 * t_ref:>8.3f} {t_ref / t_ours:>6.1f}"
        )


if __name__ == "__main__":
    main()
