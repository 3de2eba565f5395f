"""Where DP randomness comes from: a secure source nobody can regenerate, or a seed for simulations.

DP holds only if the adversary cannot know the noise.  A pseudo-random generator seeded with a
public default, or with any ``random_state`` a user passes for reproducibility, lets whoever knows
the seed regenerate the Poisson draws and the Gaussian noise of DP-SGD and subtract them: the
published ε then protects nothing.  So every path that can release a model draws its privacy
randomness (which rows a step samples, the noise added) from :class:`SecureRandom`:

* a ChaCha20 keystream (RFC 8439, through ``cryptography``) under a 256-bit key read from
  ``os.urandom`` when the source is made, fresh for every release and never stored;
* Poisson sampling by geometric gaps between the sampled rows (Devroye 1986, §X.2), so a step
  costs O(q·n) draws instead of one per row;
* Gaussian noise sampled in float64 (Box–Muller from 53-bit uniforms) and *hardened against
  floating-point attacks* as Opacus' ``secure_mode`` does (``opacus/optimizers/optimizer.py``,
  ``_generate_noise``): the sum of four independent N(0, 1) samples, halved (exactly, a power of
  two), so the low-order bits of the released value carry no trace of the unnoised one (Mironov,
  "On significance of the least significant bits for differential privacy", CCS 2012, showed
  that a textbook floating-point sampler leaks them);
* Laplace noise through diffprivlib's ``Laplace`` mechanism with its secure default source
  (``secrets.SystemRandom``) and its floating-point protection (Holohan & Braghin, "Secure
  random sampling in differential privacy", ESORICS 2021).

:class:`SeededNoise` draws the same things from a ``torch.Generator``: reproducible, for
simulations and tests only.  Learners use it only when given an explicit ``noise_seed``; the
model card's privacy record then says ``"noise": "seeded"``, :meth:`~pubsubml.sites.Site.publish`
warns and a registry refuses the card unless started for research with seeded noise allowed.

References
----------
pubsub-ml.txt §3.1 (Definition 1: the guarantee is over the mechanism's randomness); D. J.
Bernstein, "ChaCha, a variant of Salsa20", 2008, and RFC 8439; I. Mironov, CCS 2012; Opacus 1.x,
``PrivacyEngine(secure_mode=True)``; L. Devroye, Non-Uniform Random Variate Generation, 1986.
"""

from __future__ import annotations

import math
import os
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from torch import Tensor

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import NoiseKind

__all__ = [
    "NoiseKind",
    "NoiseSource",
    "SecureNoise",
    "SecureRandom",
    "SeededNoise",
    "check_noise_seed",
    "noise_kind",
]


#: Bytes of keystream one key may produce before the source re-keys from ``os.urandom``
#: (ChaCha20's 32-bit block counter allows 2³² blocks of 64 bytes; re-key well before).
_REKEY_BYTES = 1 << 36
_TWO_PI = 2.0 * math.pi


class SecureRandom:
    """Uniform, Bernoulli and Gaussian draws from a ChaCha20 keystream keyed by ``os.urandom``.

    Each instance has its own 256-bit key, read from the operating system's cryptographically
    secure source when it is made and never exposed; two instances never share draws, and no seed
    can reproduce them.

    Examples
    --------
    >>> rng = SecureRandom()
    >>> u = rng.uniform(1000)
    >>> bool((u > 0).all() and (u < 1).all())
    True
    >>> bool(rng.bernoulli(10, 1.0).all()), bool(rng.bernoulli(10, 0.0).any())
    (True, False)
    """

    kind: NoiseKind = "secure"

    def __init__(self) -> None:
        self._rekey()

    def _rekey(self) -> None:
        # A fresh key; the 16-byte ChaCha20 nonce of ``cryptography`` is the block counter (32
        # bits, little-endian, from 0) followed by the 96-bit nonce (RFC 8439 §2.4).
        nonce = bytes(4) + os.urandom(12)
        self._cipher = Cipher(algorithms.ChaCha20(os.urandom(32), nonce), mode=None).encryptor()
        self._used = 0

    def random_bytes(self, n: int) -> bytes:
        """``n`` bytes of keystream."""
        if self._used + n > _REKEY_BYTES:
            self._rekey()
        self._used += n
        return self._cipher.update(bytes(n))

    def uint64(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit unsigned integers."""
        return np.frombuffer(self.random_bytes(8 * n), dtype=np.uint64)

    def uniform(self, n: int) -> np.ndarray:
        """``n`` float64 uniforms on the open interval (0, 1): ``(k + ½)·2⁻⁵³``, k of 53 bits."""
        k = self.uint64(n) >> np.uint64(11)
        return (k.astype(np.float64) + 0.5) * 2.0**-53

    def integers(self, high: int) -> int:
        """One integer uniform on ``[0, high)`` (rejection sampling: no modulo bias)."""
        if high < 1:
            raise ValueError(f"high must be >= 1, got {high}")
        limit = (1 << 64) - (1 << 64) % high
        while True:
            value = int(self.uint64(1)[0])
            if value < limit:
                return value % high

    def random(self) -> float:
        """One float64 uniform on (0, 1) (the ``numpy.random.Generator.random`` of one draw)."""
        return float(self.uniform(1)[0])

    def choice(self, n: int, p: np.ndarray) -> int:
        """An index of ``range(n)`` drawn with probabilities ``p`` (inverse CDF, float64)."""
        cdf = np.cumsum(np.asarray(p, dtype=np.float64))
        return int(min(np.searchsorted(cdf, self.random() * cdf[-1], side="right"), n - 1))

    def bernoulli(self, n: int, p: float) -> np.ndarray:
        """A bool mask of shape (n,), each entry True with probability ``p``, independently.

        Drawn by geometric gaps: the number of False entries before the next True one is
        ``⌊ln U / ln(1 − p)⌋`` (U uniform on (0, 1)), so only about ``p·n`` uniforms are drawn.
        """
        mask = np.zeros(n, dtype=bool)
        if p >= 1.0:
            mask[:] = True
            return mask
        if p <= 0.0 or n == 0:
            return mask
        log_miss = math.log1p(-p)
        position = -1  # the last sampled index
        while True:
            batch = max(16, int(p * (n - position) * 1.1 + 4.0 * math.sqrt(p * n) + 16))
            gaps = np.floor(np.log(self.uniform(batch)) / log_miss)
            steps = np.cumsum(gaps + 1.0) + position
            inside = steps[steps < n].astype(np.int64)
            mask[inside] = True
            if len(inside) < batch:
                return mask
            position = int(inside[-1])

    def standard_normal(self, n: int) -> np.ndarray:
        """``n`` float64 N(0, 1) samples, hardened against floating-point attacks (module notes).

        Each is the halved sum of four Box–Muller samples from 53-bit uniforms.
        """
        m = 4 * n
        pairs = (m + 1) // 2
        u = self.uniform(2 * pairs)
        radius = np.sqrt(-2.0 * np.log(u[:pairs]))
        angle = torch.from_numpy(u[pairs:] * _TWO_PI)
        z = np.empty(2 * pairs)
        np.multiply(radius, torch.cos(angle).numpy(), out=z[:pairs])
        np.multiply(radius, torch.sin(angle).numpy(), out=z[pairs:])
        total: np.ndarray = z[:m].reshape(4, n).sum(axis=0) * 0.5
        return total


@runtime_checkable
class NoiseSource(Protocol):
    """Where the DP-SGD engine draws its Poisson masks and Gaussian noise (one per site)."""

    kind: NoiseKind

    def poisson_mask(self, n: int, q: float) -> Tensor:
        """A bool tensor of shape (n,), each row sampled with probability ``q``."""
        ...

    def normal_(self, out: Tensor) -> Tensor:
        """Fill ``out`` (1-D, float32) with N(0, 1) noise in place and return it."""
        ...


class SecureNoise:
    """The DP-SGD engine's secure source: :class:`SecureRandom`, fresh key per instance.

    Examples
    --------
    >>> src = SecureNoise()
    >>> src.kind, src.poisson_mask(5, 1.0).tolist(), src.normal_(torch.empty(3)).shape
    ('secure', [True, True, True, True, True], torch.Size([3]))
    """

    kind: NoiseKind = "secure"

    def __init__(self) -> None:
        self.random = SecureRandom()

    def poisson_mask(self, n: int, q: float) -> Tensor:
        """Poisson sampling, each row with probability ``q`` (geometric gaps, float64)."""
        return torch.from_numpy(self.random.bernoulli(n, q))

    def normal_(self, out: Tensor) -> Tensor:
        """Hardened N(0, 1) noise (:meth:`SecureRandom.standard_normal`), cast to ``out``'s dtype."""
        return out.copy_(torch.from_numpy(self.random.standard_normal(out.numel())).view_as(out))


class SeededNoise:
    """Reproducible draws from a ``torch.Generator``: for simulations and tests, never a release.

    Draws exactly what the engine drew from its generator before secure noise existed: per step
    ``rand(n) < q`` (float32) and ``randn(P)``.

    Parameters
    ----------
    generator : torch.Generator

    Examples
    --------
    >>> src = SeededNoise(torch.Generator().manual_seed(0))
    >>> src.kind, int(src.poisson_mask(1000, 0.5).sum())
    ('seeded', 492)
    """

    kind: NoiseKind = "seeded"

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def poisson_mask(self, n: int, q: float) -> Tensor:
        """``torch.rand(n) < q`` with ``q`` in float32."""
        return torch.rand(n, generator=self.generator) < torch.tensor(q, dtype=torch.float32)

    def normal_(self, out: Tensor) -> Tensor:
        """``torch.randn`` into ``out``."""
        return torch.randn(out.shape, generator=self.generator, out=out)


def noise_kind(sources: object) -> NoiseKind:
    """``"secure"`` when every source of ``sources`` (one or a sequence) is secure, else ``"seeded"``."""
    items = sources if isinstance(sources, list | tuple) else [sources]
    return "secure" if all(getattr(s, "kind", None) == "secure" for s in items) else "seeded"


def check_noise_seed(noise_seed: object) -> NoiseKind:
    """The kind of noise a learner's ``noise_seed`` asks for: ``None`` → secure, an int ≥ 0 → seeded.

    Raises
    ------
    InvalidPrivacyParameterError
        Anything else (a bool, a negative or non-integer value, a generator object).

    Examples
    --------
    >>> check_noise_seed(None), check_noise_seed(7)
    ('secure', 'seeded')
    """
    if noise_seed is None:
        return "secure"
    if (
        isinstance(noise_seed, bool)
        or not isinstance(noise_seed, int | np.integer)
        or noise_seed < 0
    ):
        raise InvalidPrivacyParameterError(
            f"noise_seed must be None (secure noise) or an int >= 0 (a simulation), got {noise_seed!r}"
        )
    return "seeded"
