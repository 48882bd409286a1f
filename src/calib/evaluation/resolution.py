"""The resolution floor of a binned calibration error: the smallest value its rows can tell from 0.

A binned error (ECE, MCE, the L2 ECE, classwise ECE, the positive class's ECE, CMCE) is a norm
E = ||g|| of its bins' gaps g_b = mean_b(outcome) - mean_b(score), with the bins set by the scores
alone. Given the scores, g = d + e: d the true gaps (the outcome's true mean in each bin less the
score's), e the bins' noise (the outcomes' mean less their true mean). By the triangle inequality

    ||d|| - ||e||  <=  E  <=  ||d|| + ||e||,

so an estimate exceeds the true binned error by at most N = ||e||, whatever the truth. N is the
error a perfectly calibrated model with these bin counts would show: it is drawn by
:meth:`calib.core.binning.BinCounter.without_miscalibration` (each bin's outcomes binomial at the
bin's mean score or observed rate, whichever is nearer 1/2), :data:`NULL_DRAWS` times. Its
(1 + level) / 2 quantile F is the **resolution floor**: a perfect model's estimate stays below F
with probability (1 + level) / 2 (every binned error of a perfect model is biased upward to about
the mean of N: the worst of 50 labels at 2,000 rows sits near 0.04 for ECE), and E - F is a lower
bound of the true error at that level. Gates read E - F as the lower end of their interval
(calib.evaluation.gates).

Over G groups (labels, slices) the floors are simultaneous, by max-T (Westfall & Young 1993): with
m_g and s_g the mean and standard deviation of group g's draws, c is the (1 + level) / 2 quantile
over draws of max_g (N_g - m_g) / s_g (the groups drawn independently), and F_g = m_g + c s_g. Then
every group of a perfect model stays below its floor together with probability (1 + level) / 2,
so a gate on the worst group that read the floor alone would fail a perfectly calibrated model at
most (1 - level) / 2 of the time at any threshold. With G = 1, F is the quantile itself.

The floor bounds the estimator's noise whatever shape the miscalibration has, so it is wide: a
group of 500 rows has a floor near 0.1, and a slice whose error is twice that may still not clear
it. A second bound is read beside it, for the errors that are at least |sum_b w_b d_b| (an L1, L2
or max norm of bins weighted by their rows, w_b = n_b / n: ECE, MCE, the L2 ECE, the positive
class's ECE): that is |mean of the outcome's true means - mean score|, the calibration in the large
(Cox 1958). The hits of independent rows are a Poisson-binomial count, whose tails beyond one of
its mean are no heavier than the binomial's of the same mean (Hoeffding 1956), so the Clopper-Pearson
interval [L, U] of the hit rate holds the mean of the true means, and the distance from the mean
score to [L, U] is a lower bound of the true error. A model that errs the same way in every bin
(too sure or too timid, as a wrong temperature makes it) has a true error near that distance, and
its bound is the rate's noise (1 / sqrt(n)) below it rather than the floor's sqrt(bins / n).

A gate's lower end is then the larger of E - F and that bound. Each is a lower bound at the gate's
one-sided level a = (1 - level) / 2: F is the 1 - a quantile (max-T over the groups as above) and
the intervals are at 1 - a / G (Bonferroni over G groups), so a perfect model's worst group fails
at most 2 a of the time (5% at the default level 0.95) at any threshold, and at most a through
either bound alone.

Two models of the same rows have binned errors biased by different amounts (a model whose scores
sit nearer 1/2 has noisier bins), so their raw difference moves although both are perfectly
calibrated. A change gate on a binned error compares the values less each one's mean noise m (the
expected estimate of a perfectly calibrated model with its bin counts), which is the bias at a true
error of 0 and at most the bias elsewhere.
"""

from __future__ import annotations

import copy

import numpy as np

from ..bootstrap import upper_percent
from ..core.binning import clopper_pearson
from ..core.numerics import linear_percentiles, map_in_order
from ..errors import UsageError
from ..metrics.definitions import METRICS
from ..metrics.metric_set import MetricSet

#: Draws of a perfectly calibrated model's bins per metric and group.
NULL_DRAWS = 1000
#: Drawn bin counts held at once (draws x bins): classwise bins of 1,000 classes are drawn in blocks.
DRAW_BLOCK = 2_000_000
#: How the floors are found, as reports and gate lines state it.
METHOD = "noise of a perfectly calibrated model with the same bin counts (binomial draws)"


def noise_draws(metric_set: MetricSet, key: str, seed: list[int], draws: int = NULL_DRAWS) -> np.ndarray | None:
    """``draws`` values of the binned error ``key`` of a perfectly calibrated model with the bin
    counts of ``metric_set``'s rows; None where the metric is undefined on them. Drawn in blocks of
    at most :data:`DRAW_BLOCK` bin counts, block b from the generator seeded by ``seed`` + [b], on
    worker threads (the binomial draws release the GIL): the same values for any thread count."""
    accumulator = metric_set.accumulator_of(key)
    counter = accumulator.counter
    block = max(1, DRAW_BLOCK // max(1, counter.count.size))
    compute = METRICS[key].compute
    if compute is None:
        raise UsageError(f"metric {key!r} is not streamed: it has no bin counts to draw")

    def drawn_values(start: int) -> np.ndarray | None:
        drawn = copy.copy(accumulator)
        rng = np.random.default_rng([*seed, start // block])
        drawn.counter = counter.without_miscalibration(rng, min(block, draws - start))
        values = compute(drawn, metric_set.config)
        return None if values is None else np.asarray(values, dtype=float).reshape(-1)

    drawn = list(map_in_order(drawn_values, range(0, draws, block), values=counter.count.size * min(block, draws)))
    parts = [part for part in drawn if part is not None]
    if len(parts) < len(drawn):
        return None
    values = np.concatenate(parts)
    return values if np.isfinite(values).all() else None


def mean_gap_bound(metric_set: MetricSet, key: str, level: float) -> float | None:
    """A lower bound of the true error ``key`` at ``level`` (:func:`gap_distance` of its rows' hits,
    rows and mean score); None where the metric has no such bound or no rows."""
    reader = METRICS[key].mean_gap
    found = None if reader is None else reader(metric_set.accumulator_of(key))
    if found is None or found[1] <= 0:
        return None
    hits, rows, scores = found
    return gap_distance(hits, rows, scores / rows, level)


def gap_distance(hits: float, rows: float, mean_score: float, level: float) -> float:
    """max(0, L - s, s - U): the distance from the mean score s to the Clopper-Pearson interval [L, U]
    at ``level`` of ``hits`` in ``rows`` (module docstring); 0 when the interval holds s."""
    lower, upper = clopper_pearson(hits, rows, level)
    return float(max(0.0, float(lower) - mean_score, mean_score - float(upper)))


def gap_level(level: float, groups: int = 1) -> float:
    """The Clopper-Pearson level of each of ``groups`` mean-gap bounds: 1 - (1 - level) / (2 G), so that
    the family's two-sided tails sum to the gate's one-sided level (1 - level) / 2."""
    return 1.0 - (1.0 - level) / (2.0 * max(1, groups))


def simultaneous_floors(draws: dict[str, np.ndarray], level: float) -> dict[str, float]:
    """{group: F_g = m_g + c s_g}, c the (1 + level) / 2 quantile of max_g (N_g - m_g) / s_g over
    the draws (max-T; module docstring). A group whose draws do not vary has F_g = m_g."""
    if not draws:
        return {}
    stacked = np.stack(list(draws.values()))
    mean = stacked.mean(axis=1, keepdims=True)
    spread = stacked.std(axis=1, ddof=1, keepdims=True)
    standard = np.divide(stacked - mean, spread, out=np.zeros_like(stacked), where=spread > 0)
    c = float(linear_percentiles(standard.max(axis=0), [upper_percent(level)])[0])
    floors = mean[:, 0] + c * spread[:, 0]
    return {name: float(value) for name, value in zip(draws, floors)}


def floors_section(
    keys: list[str],
    overall: MetricSet,
    group_sets: dict[str, MetricSet] | None,
    level: float,
    seed: int,
    gaps: tuple[bool, bool],
    draws: int = NULL_DRAWS,
) -> dict | None:
    """The floors of the binned errors among ``keys``, as a report's bootstrap section holds them:
    {"method", "draws", "quantile", "values": {key: F}, "means": {key:
    mean noise}, "gaps": {key: mean-gap bound}, "by_group": {key: {"groups": G, "values": {group:
    F_g}, "means": {group: mean noise}, "gaps": {group: bound}}}} for the ``group_sets`` given (the
    gated groups), the "gaps" at :func:`gap_level`. The mean noise is the expected estimate of a
    perfectly calibrated model with these bin counts: change gates subtract it from both sides
    (calib.evaluation.gates). None when no key is a binned error. ``gaps`` says whether all rows'
    and the groups' mean-gap bounds are read: they need independent pairs, one per row. Seeded by
    ``seed``: the same rows and seed give the same floors."""
    binned = [key for key in keys if METRICS[key].binned_norm]
    if not binned:
        return None
    values, means, bounds_of_all, by_group = {}, {}, {}, {}
    for key in binned:
        index = list(METRICS).index(key)  # the metric's own draws, whichever others are drawn beside it
        found = noise_draws(overall, key, [seed, 3, index], draws)
        if found is not None:
            values[key] = simultaneous_floors({"": found}, level)[""]
            means[key] = float(found.mean())
        gap = mean_gap_bound(overall, key, gap_level(level)) if gaps[0] else None
        if gap is not None:
            bounds_of_all[key] = gap
        if group_sets:
            drawn = {
                name: noise_draws(metric_set, key, [seed, 3, index, 1 + group], draws)
                for group, (name, metric_set) in enumerate(group_sets.items())
            }
            per_group = {name: found for name, found in drawn.items() if found is not None}
            by_group[key] = {
                "groups": len(per_group),
                "values": simultaneous_floors(per_group, level),
                "means": {name: float(found.mean()) for name, found in per_group.items()},
            }
            at = gap_level(level, len(per_group))
            bounds = {name: mean_gap_bound(group_sets[name], key, at) for name in per_group} if gaps[1] else {}
            bounds = {name: bound for name, bound in bounds.items() if bound is not None}
            if bounds:
                by_group[key]["gaps"] = bounds
    section = {"method": METHOD, "draws": draws, "quantile": (1.0 + level) / 2.0, "values": values, "means": means}
    if bounds_of_all:
        section["gaps"] = bounds_of_all
    if by_group:
        section["by_group"] = by_group
    return section
