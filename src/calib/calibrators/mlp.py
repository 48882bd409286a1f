"""Small MLPs for conformal thresholds: trained in torch (imported lazily, only while fitting),
stored as named float32 arrays in the bundle, and evaluated in numpy, so loading and applying a
bundle never imports torch and gives the same numbers every time.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import extras

#: Training restarts (lr / 10) while the final loss is NaN or above this (docs/calibrators.md).
RESTART_LOSS = 10.0


def standardise_stats(inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std of the training inputs (std floored at 1e-6: constant features)."""
    return inputs.mean(axis=0), np.maximum(inputs.std(axis=0), 1e-6)


def forward(arrays: dict, prefix: str, inputs: np.ndarray) -> np.ndarray:
    """Standardise with the stored statistics, then Linear (+ ReLU between layers), in float64."""
    h = (np.asarray(inputs, dtype=np.float64) - arrays[f"{prefix}_mean"]) / arrays[f"{prefix}_std"]
    depth = sum(1 for key in arrays if key.startswith(f"{prefix}_w"))  # number of Linear layers
    for i in range(depth):
        h = h @ arrays[f"{prefix}_w{i}"].astype(np.float64) + arrays[f"{prefix}_b{i}"].astype(np.float64)
        if i < depth - 1:
            np.maximum(h, 0.0, out=h)
    return h


def train(
    inputs: np.ndarray,
    targets: np.ndarray,
    layers: tuple[int, ...],
    loss_fn: Callable,
    *,
    prefix: str,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    restarts: int = 10,
    bad_loss: float = RESTART_LOSS,
    weight_decay: float = 0.0,
) -> dict:
    """Train an MLP of ``layers`` (the hidden widths, then the output width) with Adam on
    minibatches; returns its arrays (weights, biases, input statistics).

    ``loss_fn(output, target_batch)`` is a torch scalar. When the final full-data loss is NaN or
    above ``bad_loss``, training restarts from a fresh initialisation with lr / 10, at most
    ``restarts`` times (docs/calibrators.md, adaptive thresholds). When no attempt gets below
    ``bad_loss``, the attempt with the lowest finite loss is kept (not the last, whose lr is
    10^-restarts of the one asked for); ``{prefix}_loss`` and ``{prefix}_attempts`` record the kept
    loss and the attempts made (:func:`training_warnings`).

    ``weight_decay`` is Adam's L2 penalty, a ridge on every weight and bias.

    It trains on the device of :func:`calib.core.extras.training_device` (the CPU by default), in
    float32 everywhere, the minibatches drawn by a CPU generator from the seed, so a GPU draws the
    same rows; the arrays come back to the CPU.
    """
    device = extras.current_device()  # extras.training_device: the CPU unless a caller asked for a GPU
    with extras.torch_on_one_thread() as torch:  # a small model: threads cost more than they give
        nn = torch.nn

        mean, std = standardise_stats(inputs)
        x = torch.as_tensor((inputs - mean) / std, dtype=torch.float32, device=device)
        y = torch.as_tensor(targets, dtype=torch.float32, device=device)
        sizes = (x.shape[1], *layers)
        batch_size = max(1, min(batch_size, len(x)))
        kept = None  # (final loss, model) of the attempt with the lowest finite loss
        for attempt in range(restarts + 1):
            layers = []
            with torch.random.fork_rng(devices=[]):  # seeded initialisation; torch's global generator restored
                torch.manual_seed(seed + attempt)
                for i in range(len(sizes) - 1):
                    layers.append(nn.Linear(sizes[i], sizes[i + 1]))
                    if i < len(sizes) - 2:
                        layers.append(nn.ReLU())
            model = nn.Sequential(*layers).to(device)
            optimiser = torch.optim.Adam(model.parameters(), lr=lr / 10**attempt, weight_decay=weight_decay)
            generator = torch.Generator().manual_seed(seed + attempt)
            for _ in range(steps):
                batch = torch.randint(0, len(x), (batch_size,), generator=generator).to(device)
                optimiser.zero_grad()
                loss = loss_fn(model(x[batch]), y[batch])
                loss.backward()
                optimiser.step()
            with torch.no_grad():
                final = float(loss_fn(model(x), y))
            if kept is None or (np.isfinite(final) and not final >= kept[0]):
                kept = (final, model)
            if np.isfinite(final) and final <= bad_loss:
                break
    final, model = kept
    arrays = {
        f"{prefix}_mean": mean.astype(np.float64),
        f"{prefix}_std": std.astype(np.float64),
        f"{prefix}_loss": np.array(final),
        f"{prefix}_attempts": np.array(attempt + 1),
    }
    linear = [m for m in model if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linear):
        arrays[f"{prefix}_w{i}"] = layer.weight.detach().cpu().numpy().T.copy()
        arrays[f"{prefix}_b{i}"] = layer.bias.detach().cpu().numpy().copy()
    return arrays


def training_warnings(arrays: dict, prefix: str, what: str, bad_loss: float = RESTART_LOSS) -> list[str]:
    """A sentence when the training of ``prefix``'s MLP never got its loss to ``bad_loss`` or
    below (bundles from before these records give none)."""
    loss = arrays.get(f"{prefix}_loss")
    if loss is None or float(loss) <= bad_loss:
        return []
    attempts = int(arrays[f"{prefix}_attempts"])
    return [
        f"the {what}'s training loss stayed above {bad_loss:g} in all {attempts} attempts; the lowest "
        f"({float(loss):.4g}) was kept: its thresholds are still conformal, but may adapt little to x"
    ]
