"""The model: a synthetic dataset, its minibatch order, a 2-layer MLP and Adam, all numpy.

Everything is float64 and driven by explicit ``numpy.random.Generator`` streams derived from the
seed, so the same seed gives the same bits. Each piece can export its full state as named arrays
plus JSON-able values for a checkpoint, and be rebuilt from them exactly.
"""

from __future__ import annotations

import numpy as np

from vsp.components.runtime.core import errors

PARAM_NAMES = ("W1", "b1", "W2", "b2")

# Independent streams from one seed: numpy's SeedSequence mixes [seed, stream].
DATA_STREAM, INIT_STREAM, TRAIN_STREAM = 0, 1, 2


def stream(seed: int, which: int) -> np.random.Generator:
    """The PCG64 generator of stream ``which`` of ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise errors.UserError(f"seed must be an int >= 0, got {seed!r}")
    return np.random.Generator(np.random.PCG64([seed, which]))


def make_dataset(
    seed: int, n_samples: int, n_features: int, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian inputs labelled by a random "teacher" MLP plus a little label noise.

    Returns:
        ``(x, y)``: float64 ``(n_samples, n_features)`` and int64 ``(n_samples,)`` labels.
    """
    rng = stream(seed, DATA_STREAM)
    x = rng.standard_normal((n_samples, n_features))
    teacher_hidden = np.tanh(x @ rng.standard_normal((n_features, 16)))
    logits = teacher_hidden @ rng.standard_normal((16, n_classes))
    logits += 0.3 * rng.standard_normal(logits.shape)
    return x, np.argmax(logits, axis=1).astype(np.int64)


class BatchOrder:
    """Shuffled epochs without replacement; the position survives checkpoints exactly.

    Attributes:
        epoch: Number of permutations drawn so far.
        index: Position of the next batch in ``perm``.
        perm: The current epoch's permutation (empty before the first batch).
    """

    def __init__(self, n_samples: int, batch_size: int):
        if not 1 <= batch_size <= n_samples:
            raise errors.UserError(f"batch size must be in [1, {n_samples}], got {batch_size}")
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.epoch = 0
        self.index = 0
        self.perm = np.zeros(0, dtype=np.int64)

    def next_indices(self, rng: np.random.Generator) -> np.ndarray:
        """Indices of the next minibatch; draws a new permutation when the epoch runs out."""
        if self.perm.size == 0 or self.index + self.batch_size > self.n_samples:
            self.perm = rng.permutation(self.n_samples).astype(np.int64)
            self.epoch += 1
            self.index = 0
        batch = self.perm[self.index : self.index + self.batch_size]
        self.index += self.batch_size
        return batch


def init_params(seed: int, n_features: int, hidden: int, n_classes: int) -> dict[str, np.ndarray]:
    """Glorot-scaled weights, zero biases."""
    rng = stream(seed, INIT_STREAM)
    return {
        "W1": rng.standard_normal((n_features, hidden)) * np.sqrt(2.0 / (n_features + hidden)),
        "b1": np.zeros(hidden),
        "W2": rng.standard_normal((hidden, n_classes)) * np.sqrt(2.0 / (hidden + n_classes)),
        "b2": np.zeros(n_classes),
    }


def loss_and_grads(
    params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, l2: float = 1e-4
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean softmax cross-entropy (+ L2 on weights) of ``tanh`` MLP and its gradients."""
    hidden = np.tanh(x @ params["W1"] + params["b1"])
    logits = hidden @ params["W2"] + params["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    rows = np.arange(len(y))
    weights = (params["W1"] ** 2).sum() + (params["W2"] ** 2).sum()
    loss = float(-log_probs[rows, y].mean() + 0.5 * l2 * weights)
    d_logits = np.exp(log_probs)
    d_logits[rows, y] -= 1.0
    d_logits /= len(y)
    d_hidden = (d_logits @ params["W2"].T) * (1.0 - hidden**2)
    grads = {
        "W1": x.T @ d_hidden + l2 * params["W1"],
        "b1": d_hidden.sum(axis=0),
        "W2": hidden.T @ d_logits + l2 * params["W2"],
        "b2": d_logits.sum(axis=0),
    }
    return loss, grads


class Adam:
    """Adam (Kingma & Ba) with bias correction, updating parameter arrays in place.

    Attributes:
        t: Number of updates applied.
        m: First-moment estimates, by parameter name.
        v: Second-moment estimates, by parameter name.
    """

    def __init__(
        self,
        params: dict[str, np.ndarray],
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ):
        if not lr > 0:
            raise errors.UserError(f"learning rate must be > 0, got {lr!r}")
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.t = 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}

    def update(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Applies one Adam step to ``params`` in place."""
        self.t += 1
        correct1 = 1.0 - self.beta1**self.t
        correct2 = 1.0 - self.beta2**self.t
        for name, grad in grads.items():
            self.m[name] *= self.beta1
            self.m[name] += (1.0 - self.beta1) * grad
            self.v[name] *= self.beta2
            self.v[name] += (1.0 - self.beta2) * grad * grad
            step = (
                self.lr * (self.m[name] / correct1) / (np.sqrt(self.v[name] / correct2) + self.eps)
            )
            params[name] -= step
