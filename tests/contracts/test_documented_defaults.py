"""Every default that the reference pages state is the one the code uses: each number is read from
docs/calibrators.md or docs/metrics.md and compared with the constant behind it, so a changed
default fails here until its documentation changes with it. Also adaptive-ts fitted end to end."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import needs

import calib
from calib import CALIBRATORS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def table_row(page: str, key: str) -> str:
    """The line of ``page``'s method or metric table that starts with ``key``."""
    for line in (DOCS / page).read_text().splitlines():
        if line.startswith(f"| {key} |") or line.startswith(f"| `{key}` |"):
            return line
    raise AssertionError(f"no row {key!r} in docs/{page}")


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?", text)]


def test_adaptive_ts_settings_are_the_documented_ones():
    from calib.calibrators import temperature as t

    row = table_row("calibrators.md", "adaptive-ts")
    hidden = re.search(r"MLP \((\d+), (\d+)\)", row).groups()
    assert tuple(int(h) for h in hidden) == t.ADAPTIVE_HIDDEN
    assert float(re.search(r"Adam (\S+),", row).group(1)) == t.ADAPTIVE_LR
    assert int(re.search(r"(\d+) epochs", row).group(1)) == t.ADAPTIVE_EPOCHS
    assert int(re.search(r"minibatches of (\d+)", row).group(1)) == t.ADAPTIVE_BATCH
    assert float(re.search(r"softplus\(MLP\(z\)\) \+ (\S+),", row).group(1)) == t.TEMPERATURE_FLOOR


def test_temperature_scaling_settings_are_the_documented_ones():
    from calib.calibrators import temperature as t

    assert float(re.search(r"relative step (\S+) ", table_row("calibrators.md", "ts")).group(1)) == t.BETA_RTOL
    row = table_row("calibrators.md", "cmce-ts")
    assert int(re.search(r"CMCE \((\d+) bins\)", row).group(1)) == t.CMCE_BINS
    assert int(re.search(r"over (\d+) log-spaced", row).group(1)) == len(t.CMCE_GRID)
    assert re.search(r"on \[1e-2, 1e2\]", row) and (t.CMCE_GRID[0], t.CMCE_GRID[-1]) == (1e-2, 1e2)


def test_score_parameters_are_the_documented_ones():
    from calib.calibrators.conformal import ScoreOptions

    text = (DOCS / "calibrators.md").read_text()
    options = ScoreOptions()
    assert float(re.search(r"-O raps_lambda=(\S+) ", text).group(1)) == options.raps_lambda
    assert int(re.search(r"-O raps_kreg=(\d+)", text).group(1)) == options.raps_kreg
    assert float(re.search(r"-O saps_lambda=([\d.]+)", text).group(1)) == options.saps_lambda


def test_metric_settings_are_the_documented_ones():
    from calib.metrics.smooth import GRID

    assert int(re.search(r"on a (\d+)-point grid", table_row("metrics.md", "smece")).group(1)) == GRID
    report = calib.evaluate(np.array([[0.5, 0.5]]), np.array([0]), metrics=["nll"], kind="probs")
    clip = float(re.search(r"prob_clip: (\S+)`", table_row("metrics.md", "nll")).group(1))
    assert report.entries.metrics["nll"].settings["prob_clip"] == clip


def test_adaptive_ts_fits_a_temperature_per_row_that_lowers_the_nll():
    """Fitted on 1,000 CIFAR-10 validation rows, on the test rows: its NLL is below the model's and
    within 5% of one temperature's, every temperature above the floor, and log p = log_softmax(z / T(z))."""
    needs("torch")
    val, test = (np.load(calib.sample_path(f"cifar10_{part}.npz")) for part in ("val", "test"))
    logits, labels = val["logits"][:1000].astype(np.float64), val["labels"][:1000]
    z, y = test["logits"][:2000].astype(np.float64), test["labels"][:2000]
    fitted = CALIBRATORS["adaptive-ts"]().fit(logits, labels)
    ts = CALIBRATORS["ts"]().fit(logits, labels)

    def nll(log_probs):
        return float(-log_probs[np.arange(len(y)), y].mean())

    log_probs = fitted.transform(z)
    temperatures = fitted.temperatures(z)
    assert temperatures.shape == (len(z),) and (temperatures > 1e-6).all()
    np.testing.assert_allclose(log_probs, calib.core.numerics.log_softmax(z / temperatures[:, None]), atol=1e-12)
    raw = nll(calib.core.numerics.log_softmax(z))
    assert nll(log_probs) < raw and nll(log_probs) <= 1.05 * nll(ts.transform(z))


@pytest.mark.parametrize("text, expected", [("(128, 64) Adam 5e-4", [128, 64, 5e-4]), ("T = 1", [1.0])])
def test_numbers_reads_the_numbers_of_a_line(text, expected):
    assert numbers(text) == expected


def test_adaptive_ts_draws_from_seed_zero_by_default():
    needs("torch")
    data = np.load(calib.sample_path("cifar10_val.npz"))
    logits, labels = data["logits"][:200].astype(np.float64), data["labels"][:200]
    default = CALIBRATORS["adaptive-ts"]().fit(logits, labels).arrays_
    seeded = CALIBRATORS["adaptive-ts"]().fit(logits, labels, seed=0).arrays_
    other = CALIBRATORS["adaptive-ts"]().fit(logits, labels, seed=1).arrays_
    assert all(np.array_equal(default[key], seeded[key]) for key in default)
    assert not np.array_equal(default["temperature_w0"], other["temperature_w0"])


def test_adaptive_ts_temperature_is_softplus_of_its_one_output_plus_the_floor():
    """T(z) = softplus(MLP(z)) + 1e-6, the MLP (K -> 128 -> 64 -> 1) evaluated from its saved arrays."""
    needs("torch")
    from calib.calibrators import mlp

    data = np.load(calib.sample_path("cifar10_val.npz"))
    logits, labels = data["logits"][:200].astype(np.float64), data["labels"][:200]
    fitted = CALIBRATORS["adaptive-ts"]().fit(logits, labels)
    shapes = [fitted.arrays_[f"temperature_w{i}"].shape for i in range(3)]
    assert shapes == [(10, 128), (128, 64), (64, 1)]
    out = mlp.forward(fitted.arrays_, "temperature", logits)[:, 0]
    np.testing.assert_array_equal(fitted.temperatures(logits), np.logaddexp(0.0, out) + 1e-6)
