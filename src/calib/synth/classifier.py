"""The Gaussian-grid classifier of docs/benchmarks.md: random Fourier features + an MLP, in torch.

phi(x) = [x, sin(2 pi B^T x), cos(2 pi B^T x)], B ~ N(0, 0.5^2) of shape (2, 64), then
Linear(130, 256)-GELU-LayerNorm-Linear(256, 256)-GELU-LayerNorm-Linear(256, K), trained with AdamW
(lr 3e-3, weight decay 1e-2), a cosine schedule, label smoothing 0.1, batch 1024, seeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import extras

N_FOURIER = 64
FOURIER_SCALE = 0.5
HIDDEN = 256


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 15
    batch_size: int = 1024
    lr: float = 3e-3
    weight_decay: float = 1e-2
    label_smoothing: float = 0.1


def _build(n_classes: int, seed: int):
    torch = extras.torch()
    nn = torch.nn

    generator = torch.Generator().manual_seed(seed)
    fourier = torch.randn(2, N_FOURIER, generator=generator) * FOURIER_SCALE

    class RFFNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("fourier", fourier)
            self.mlp = nn.Sequential(
                nn.Linear(2 + 2 * N_FOURIER, HIDDEN),
                nn.GELU(),
                nn.LayerNorm(HIDDEN),
                nn.Linear(HIDDEN, HIDDEN),
                nn.GELU(),
                nn.LayerNorm(HIDDEN),
                nn.Linear(HIDDEN, n_classes),
            )

        def forward(self, x):
            projected = 2.0 * torch.pi * x @ self.fourier
            return self.mlp(torch.cat([x, torch.sin(projected), torch.cos(projected)], dim=1))

    # the layers' initialisation from ``seed``, with torch's global generator restored afterwards
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RFFNet()


def train_classifier(
    points: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    *,
    seed: int = 0,
    config: TrainConfig = TrainConfig(),
    progress: Callable[[int, int, float], None] | None = None,
):
    """Train on (points, labels); returns the model. ``progress(epoch, epochs, mean_loss)`` per epoch."""
    with extras.torch_on_one_thread() as torch:  # a small network: one thread is several times faster
        model = _build(n_classes, seed)
        x = torch.as_tensor(points, dtype=torch.float32)
        y = torch.as_tensor(labels, dtype=torch.long)
        optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        steps_per_epoch = -(-len(x) // config.batch_size)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=config.epochs * steps_per_epoch)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=config.label_smoothing)
        generator = torch.Generator().manual_seed(seed + 1)
        model.train()
        for epoch in range(config.epochs):
            order = torch.randperm(len(x), generator=generator)
            total = 0.0
            for start in range(0, len(x), config.batch_size):
                batch = order[start : start + config.batch_size]
                optimiser.zero_grad()
                loss = loss_fn(model(x[batch]), y[batch])
                loss.backward()
                optimiser.step()
                schedule.step()
                total += float(loss.detach()) * len(batch)
            if progress is not None:
                progress(epoch + 1, config.epochs, total / len(x))
    model.eval()
    return model


def predict_logits(model, points: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """(N, K) float32 logits, in batches."""
    out = []
    with extras.torch_on_one_thread() as torch, torch.no_grad():
        for start in range(0, len(points), batch_size):
            out.append(model(torch.as_tensor(points[start : start + batch_size], dtype=torch.float32)).numpy())
    return np.concatenate(out).astype(np.float32)
