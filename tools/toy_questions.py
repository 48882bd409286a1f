"""The seeded toy model behind the evaluation logs that tools/make_inspect_logs.py and
tools/make_helm_run.py write with each tool's own code: a question's logits over its choices come
from its text, so the model and the data generator agree on them without sharing state."""

from __future__ import annotations

import hashlib

import numpy as np


def question_logits(text: str, k: int) -> np.ndarray:
    """The model's logits over a question's ``k`` choices: normal(0, 1.6) draws seeded by the
    sha256 of the question's text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(0.0, 1.6, size=k)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()
