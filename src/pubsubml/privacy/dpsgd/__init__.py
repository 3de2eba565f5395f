"""The DP-SGD engine: per-sample clipping, Gaussian noise and Poisson sampling, for one model or
many at once.

It trains; the accountants (:mod:`pubsubml.privacy.accountants`) turn what it reports it ran into
ε.  Modules: :mod:`~pubsubml.privacy.dpsgd.config` (the run's hyperparameters and its record),
:mod:`~pubsubml.privacy.dpsgd.functions` (losses and activations),
:mod:`~pubsubml.privacy.dpsgd.generic` (any module, ``torch.func``),
:mod:`~pubsubml.privacy.dpsgd.mlp_stack` and :mod:`~pubsubml.privacy.dpsgd.stacked` (``S`` MLPs
at once), :mod:`~pubsubml.privacy.dpsgd.canaries` (audit records given by their gradients).

Publishers train their models with DP-SGD (pubsub-ml.txt §7.2 and §8: "the DP guaranteed using
DPSGD [1]", Abadi et al. 2016).  Each step samples every row independently with probability ``q``
(Poisson sampling, which the accountant assumes), clips every per-sample gradient to L2 norm ``C``
over all parameters jointly, adds N(0, σ²C²) to the sum of clipped gradients and divides by the
*expected* batch size ``q·n`` (as Opacus does).  An epoch is ``round(1/q)`` steps.

Two paths compute the clipped sum:

* the generic path (:func:`per_sample_gradients`, :func:`train_dp`) works for any ``nn.Module``
  with ``torch.func`` (vmap + grad + functional_call) and is the reference;
* the fast path (:class:`MLPStack`, :func:`train_dp_stacked`) trains ``S`` multilayer perceptrons
  (Linear + elementwise activation) at once, parameters stacked along a leading site dimension, and
  never materialises per-sample gradients: the per-sample gradient of a linear layer is the outer
  product ``g_i a_iᵀ``, so ``‖∇_i‖² = Σ_layers ‖g_i‖²(‖a_i‖² + 1)`` and the clipped sum is
  ``(c ∘ G)ᵀ A``, one batched matmul per layer ("ghost clipping").

Randomness follows one protocol in both paths, so a site's model depends only on its own sources:
the initial weights (:func:`init_mlp`) from its generator, then per step the Poisson mask over its
``n`` rows and the noise over all ``P`` parameters in ``module.parameters()`` order from its noise
source (:mod:`pubsubml.privacy.noise`): :class:`~pubsubml.privacy.noise.SecureNoise` for a model
that may be released, or by default :class:`~pubsubml.privacy.noise.SeededNoise` over the same
generator (``rand(n) < q`` and ``randn(P)``), reproducible, for simulations.  Without privacy
(``DPSGDConfig(private=False)``) both paths shuffle (``randperm(n)`` per epoch) into minibatches of
``batch_size`` rows and average the unclipped gradients.  Every site of a stack has its own data
size, sample rate, step count, noise and optimizer state; torch's Adam and SGD are elementwise, so
the stacked optimizer is exactly ``S`` independent ones.

Notes
-----
The guarantee holds for what :class:`TrainResult` reports (steps, sample rate, σ, C) and for
add/remove-one neighbours; compute ε from :attr:`TrainResult.events`.  It holds against an
adversary who cannot know the noise: with the default seeded source (as in Opacus without
``secure_mode``) whoever knows the seed can regenerate the noise, so a model that may leave the
site is trained with ``noise=SecureNoise()`` (a ChaCha20 stream keyed from ``os.urandom``, noise
hardened against floating-point attacks; the learners do this unless given a ``noise_seed``).

Speed: the fast path runs small batched matmuls; on a machine whose cores are shared with other
processes, one intra-op thread (``torch.set_num_threads(1)``) is often much faster than several,
because idle OpenMP workers compete for the cores (see ``benchmarks/RESULTS.md``).

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.privacy.dpsgd.canaries import CanaryGradients
    from pubsubml.privacy.dpsgd.config import DPSGDConfig, TrainResult
    from pubsubml.privacy.dpsgd.functions import ACTIVATIONS, LOSSES, Activation, Loss
    from pubsubml.privacy.dpsgd.generic import (
        clip_per_sample,
        init_mlp,
        per_sample_gradients,
        poisson_sample,
        train_dp,
    )
    from pubsubml.privacy.dpsgd.mlp_stack import MLPStack
    from pubsubml.privacy.dpsgd.stacked import GradHook, train_dp_stacked

__all__ = [
    "ACTIVATIONS",
    "LOSSES",
    "Activation",
    "CanaryGradients",
    "DPSGDConfig",
    "GradHook",
    "Loss",
    "MLPStack",
    "TrainResult",
    "clip_per_sample",
    "init_mlp",
    "per_sample_gradients",
    "poisson_sample",
    "train_dp",
    "train_dp_stacked",
]

__getattr__, __dir__ = attach(__name__, __file__)
