"""The verdict of a comparison: which change, if any, left its noise, tested in a fixed order.

With labels on NEW the tests are, in order:

1. ``performance loss`` / ``performance gain``: the class accuracy changed: each batch's per-class
   accuracy at NEW's class shares (:mod:`calib.drift.analysis`), which label shift alone leaves
   unchanged. A worse or better model, or a new concept the model no longer knows: no post-hoc map
   of the outputs restores lost accuracy.
2. ``label shift``: the labels' class shares differ (a chi-square test of homogeneity).
3. ``performance loss`` / ``performance gain`` (discrimination): the class-wise recalibrated Brier
   score UNC - DSC rose (fell): the best score any per-class recalibration of the probabilities
   reaches got worse (better), which no recalibration recovers. Its UNC moves with the class shares
   alone (tested before it), not with the accuracy, as the top label's a (1 - a) does: a collapse
   of the accuracy lowers the top-label recalibrated score with it.
4. ``calibration decay`` / ``calibration improvement``: the top-label miscalibration MCB of the decay
   score (log loss by default) rose (fell).
5. ``other change``: some other quantity compared (raw accuracy, top-k accuracy, Brier, log loss,
   every term of both decompositions) changed.
6. ``none``: no test fired.

A change "fired" when its interval lies off 0. The five tests share the comparison's 1 - level
(Bonferroni: each at 1 - (1 - level) / 5, the fifth split again over its quantities), so that two
batches without any change get a verdict other than "none" at most 1 - level of the time (1%) by
construction; each test's interval is recomputed from the replicates at its own level.

Without labels on NEW only label shift can be told: EM's priors of NEW against EM's priors of REF,
beyond the Bonferroni normal bound over the classes at 1 - level (:mod:`calib.drift.priors`).
"""

from __future__ import annotations

from decimal import Decimal
from statistics import NormalDist

import numpy as np

from ..evaluation.gate_noise import bonferroni_level
from .analysis import interval
from .report import Change, Finding

#: The verdicts a comparison calls
VERDICTS = (
    "performance loss",
    "performance gain",
    "label shift",
    "calibration decay",
    "calibration improvement",
    "other change",
    "none",
)
#: The remedy each verdict implies (None: no post-hoc map undoes it, or nothing to undo)
REMEDIES = {"label shift": "prior correction", "calibration decay": "recalibration"}
#: The quantity the discrimination test reads
DISCRIMINATION = "classwise.brier.recalibrated"
#: The tests that share the level, in order
TESTS = ("performance", "label shift", "discrimination", "calibration", "any change")


def size_of_each_test(level: float, tests: int = len(TESTS)) -> float:
    """Each test's size, (1 - ``level``) / ``tests``, of the level as written (its shortest decimal:
    1 - 0.99 is 0.01, where binary floating point gives 0.010000000000000009)."""
    return float((Decimal(1) - Decimal(repr(level))) / tests)


def _at(change: Change, replicates, level: float) -> Change:
    """``change`` with its interval at ``level`` from its replicates."""
    if change is None or change.value is None or replicates is None:
        return Change(None if change is None else change.ref, None if change is None else change.new, None, None)
    return Change(change.ref, change.new, change.value, interval(np.asarray(replicates, dtype=float), change.value, level))


def _shown(change: Change, level: float) -> str:
    if change.ci is None:
        return "n/a"
    lo, hi = change.ci
    return f"{change.value:+.4g} [{lo:+.4g}, {hi:+.4g}] ({level:.4g} interval)"


def _two_sided(
    test: str, path: str, change: Change, level: float, what: str, verdicts: tuple[str, str], beside: str = ""
) -> Finding:
    """A test that fires when ``change``'s interval at ``level`` lies above 0 (``verdicts[0]``) or
    below (``[1]``); its evidence names ``what`` moved how far, and ``beside`` that."""
    moved = change.beyond_noise()
    verdict = verdicts[0] if moved > 0 else verdicts[1] if moved < 0 else None
    return Finding(test, path, verdict, f"{what} {change.ref:.4g} -> {change.new:.4g}: {_shown(change, level)}{beside}")


def labelled_findings(
    metrics: dict[str, Change], decomposition: dict, replicates: dict, p_value: float, l1: float, level: float, decay_score: str
) -> list[Finding]:
    """The tests of the module docstring in order, each with its evidence; the first that fired
    (``verdict`` not None) is the verdict."""
    size = size_of_each_test(level)
    each = 1.0 - size
    accuracy = _at(metrics["class_accuracy"], replicates.get("class_accuracy"), each)
    findings = [
        _two_sided(
            "performance",
            "class_accuracy",
            accuracy,
            each,
            "accuracy at NEW's class shares",
            ("performance gain", "performance loss"),
            f"; accuracy {metrics['accuracy'].ref:.4g} -> {metrics['accuracy'].new:.4g}",
        ),
        Finding(
            "label shift",
            "prior_shift",
            "label shift" if p_value < size else None,
            f"class shares of the labels: chi-square homogeneity p = {p_value:.3g} (test at {size:.3g}); L1 distance {l1:.4g}",
        ),
    ]
    recalibrated = _at(_lookup(decomposition, DISCRIMINATION), replicates.get(DISCRIMINATION), each)
    findings.append(
        _two_sided(
            "discrimination",
            DISCRIMINATION,
            recalibrated,
            each,
            "class-wise recalibrated Brier score UNC - DSC",
            ("performance loss", "performance gain"),
        )
    )
    path = f"top_label.{decay_score}.mcb"
    miscalibration = _at(_lookup(decomposition, path), replicates.get(path), each)
    findings.append(
        _two_sided(
            "calibration",
            path,
            miscalibration,
            each,
            f"top-label {decay_score} miscalibration (MCB)",
            ("calibration decay", "calibration improvement"),
        )
    )
    read = {finding.reads for finding in findings}
    others = {path: change for path, change in _quantities(metrics, decomposition).items() if path not in read}
    findings.append(_any_change(others, replicates, each))
    return findings


def _lookup(decomposition: dict, path: str) -> Change:
    problem, score, term = path.split(".")
    return decomposition[problem][score][term]


def _quantities(metrics: dict[str, Change], decomposition: dict) -> dict[str, Change]:
    """Every quantity compared, by path: the metrics, then each decomposition's terms."""
    out = dict(metrics)
    for problem, scores in decomposition.items():
        for score, terms in scores.items():
            for term, change in terms.items():
                out[f"{problem}.{score}.{term}"] = change
    return out


def _any_change(others: dict[str, Change], replicates: dict, level: float) -> Finding:
    """The catch-all test at ``level`` split over the quantities: the one furthest beyond its noise,
    or the statement that none left it."""
    family = bonferroni_level(level, len(others))
    moved = {}
    for path, change in others.items():
        found = _at(change, replicates.get(path), family)
        if found.beyond_noise():
            moved[path] = found
    if moved:
        path = max(moved, key=lambda p: moved[p].in_widths())
        return Finding(
            "any change",
            path,
            "other change",
            f"{path} {moved[path].ref:.4g} -> {moved[path].new:.4g}: {_shown(moved[path], family)}, one of "
            f"{len(moved)} of the {len(others)} other quantities that changed",
        )
    return Finding(
        "any change",
        "all",
        None,
        f"no change left its noise: none of the {len(TESTS)} tests fired (each at {level:.4g}; the last over "
        f"{len(others)} quantities, each at {family:.4g})",
    )


def verdict_of(findings: list[Finding]) -> str:
    """The first verdict a test called, else "none"."""
    return next((finding.verdict for finding in findings if finding.verdict is not None), "none")


def unlabelled_findings(priors: dict, level: float) -> list[Finding]:
    """Without labels on NEW: label shift when some class's EM prior moved beyond the Bonferroni
    normal bound over the K classes (``priors`` holds the largest z and the bound)."""
    moved = priors["largest_z"] > priors["bound"]
    return [
        Finding(
            "label shift",
            "prior_shift",
            "label shift" if moved else None,
            f"EM's class priors of NEW against REF's: largest |z| {priors['largest_z']:.3g} against the bound "
            f"{priors['bound']:.3g} (Bonferroni over {len(priors['ref'])} classes at {level:.0%}); L1 distance {priors['l1']:.4g}",
        ),
    ]


#: What a comparison without labels on NEW cannot tell, as its report notes
UNLABELLED_NOTE = "without labels on NEW only label shift can be told; accuracy, calibration and discrimination need NEW's labels"


def bound_of(level: float, classes: int) -> float:
    """The Bonferroni normal bound of the unlabelled test: z_{1 - (1 - level) / (2 K)}."""
    return NormalDist().inv_cdf(1.0 - (1.0 - level) / (2.0 * classes))
