"""Worlds for ``calib compare`` whose truth is known: a reference batch and a new batch of one
model's predictions, with nothing changed, the class priors moved, the model's calibration decayed,
or a new concept (docs/synth.md, "Shift worlds").

The data: y ~ pi, x = a e_y + eps, eps ~ N(0, I_K), so the true posterior is softmax(a x + log pi)
(the class means are equally far from 0). The model's logits are a x + log pi_ref: calibrated on
the reference, whose priors pi_ref are uniform.

- ``none``: the new batch is drawn as the reference is.
- ``label shift``: the new batch's priors are a Dirichlet(1) draw; p(x | y) and the model are
  unchanged, so the model is miscalibrated by exactly the prior ratio (the prior correction undoes it).
- ``calibration decay``: the data are unchanged and the model's logits are multiplied by
  :data:`DECAY` (an over-confident model; temperature scaling undoes it).
- ``new concept``: the model sees x + eta, eta ~ N(0, :data:`CONCEPT_NOISE`^2 I): it discriminates
  less, and no map of its outputs recovers what the noise took.
- ``worse model (-D points)``, ``better model (+D points)``: another model on the same rows'
  distribution, calibrated and less (more) accurate by D points: the new (reference) batch's model
  sees x' = x + s eta and its logits are the true posterior of x', a x' / (1 + s^2) + log pi (x' | y
  is normal around a e_y with variance 1 + s^2), with s from :data:`SWAP_NOISE` (measured on
  400,000 rows: 0.8087 at s = 0, and D points less at each s).
"""

from __future__ import annotations

import numpy as np

#: The noise s of a calibrated model D accuracy points below the reference's (module docstring)
SWAP_NOISE = {5: 0.4309, 20: 0.9692, 60: 4.558}
WORLDS = (
    "none",
    "label shift",
    "calibration decay",
    "new concept",
    "worse model (-5 points)",
    "worse model (-20 points)",
    "worse model (-60 points)",
    "better model (+5 points)",
)
#: The verdict each world must get from calib compare
EXPECTED = {
    "none": "none",
    "label shift": "label shift",
    "calibration decay": "calibration decay",
    "new concept": "performance loss",
    "worse model (-5 points)": "performance loss",
    "worse model (-20 points)": "performance loss",
    "worse model (-60 points)": "performance loss",
    "better model (+5 points)": "performance gain",
}
#: The class means' distance from 0 (a): top-1 accuracy about 0.78 at K = 10
SEPARATION = 2.5
#: The factor of the decayed model's logits
DECAY = 1.5
#: The standard deviation of the new concept's noise
CONCEPT_NOISE = 1.0


def _batch(n: int, priors: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.choice(len(priors), size=n, p=priors)
    x = rng.standard_normal((n, len(priors)))
    x[np.arange(n), labels] += SEPARATION
    return x, labels


def shift_world(world: str, n: int, rng: np.random.Generator, n_classes: int = 10) -> dict:
    """A reference and a new batch of ``n`` rows each of ``world`` (:data:`WORLDS`): their model
    logits and labels, the new batch's true priors and true probabilities."""
    if world not in WORLDS:
        raise ValueError(f"world must be one of {', '.join(WORLDS)}; got {world!r}")
    uniform = np.full(n_classes, 1.0 / n_classes)
    ref_x, ref_labels = _batch(n, uniform, rng)
    priors = rng.dirichlet(np.ones(n_classes)) if world == "label shift" else uniform
    new_x, new_labels = _batch(n, priors, rng)
    truth = SEPARATION * new_x + np.log(priors)
    if world == "new concept":
        new_x = new_x + CONCEPT_NOISE * rng.standard_normal(new_x.shape)
    scale = DECAY if world == "calibration decay" else 1.0
    new_logits = scale * SEPARATION * new_x + np.log(uniform)
    ref_logits = SEPARATION * ref_x + np.log(uniform)
    if world.startswith(("worse model", "better model")):
        noise = SWAP_NOISE[int(world.split("(")[1].strip("+-").split()[0])]
        worse = "new" if world.startswith("worse") else "ref"
        seen = (new_x if worse == "new" else ref_x) + noise * rng.standard_normal(new_x.shape)
        noisy = SEPARATION / (1.0 + noise**2) * seen + np.log(uniform)
        new_logits, ref_logits = (noisy, ref_logits) if worse == "new" else (new_logits, noisy)
    truth = np.exp(truth - truth.max(axis=1, keepdims=True))
    return {
        "ref_logits": ref_logits,
        "ref_labels": ref_labels,
        "new_logits": new_logits,
        "new_labels": new_labels,
        "new_priors": priors,
        "new_true_probs": truth / truth.sum(axis=1, keepdims=True),
    }
