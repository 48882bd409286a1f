"""The estimation of a batch without labels (or with some): the estimates of the whole batch and of
each group, what its labelled rows say, the gates on the estimates, and the JSON of it all.

Where some rows have labels (a partial label column), those rows' scores are what they realised and
the others' are estimated (:func:`~calib.estimation.batch.estimate_batch` on the unlabelled rows): the
batch's estimate is (n_l s_l + n_u e_u) / n, its interval the unlabelled part's scaled by n_u / n. The
labelled rows also test the map (:mod:`.labelled`): a map they find broken makes every estimate
unreliable.

A gate on an estimate (``est_accuracy<0.9``) reads its interval as a gate reads a bootstrap
interval (:mod:`calib.evaluation.gate_noise`): fail when the whole interval fails, pass when the whole
interval passes, inconclusive otherwise; an unreliable estimate's gate is inconclusive, with the
reasons. ``max_group:`` and ``min_group:`` gate the groups of at least ``min_group_rows`` unlabelled
rows as the evaluation's group gates do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..core.validation import MISSING_LABEL
from ..errors import InputError, UsageError
from ..evaluation.gate_noise import INCONCLUSIVE, Spread, decided, noise_fields, outcome
from ..evaluation.gate_parsing import parse_gate
from ..evaluation.gates import Gate
from ..evaluation.groups import AGGREGATES
from .batch import ESTIMATES, BatchEstimate, Estimate, check_estimator, estimate_state
from .expectations import SCORES
from .labelled import BROKEN, CalibrationTest, calibration_test
from .reference import ReferenceRows
from .state import BatchState

#: How a gate on an estimate reads its noise
NOISE = "interval of the estimate (the batch's sampling and the calibration map's error)"


@dataclass(frozen=True)
class EstimationSettings:
    """What an estimation is asked for: the interval level, the seed of EM's bootstrap, the
    estimator (:data:`calib.estimation.batch.ESTIMATORS`), the gates (``est_accuracy<0.9``), what an
    inconclusive gate counts as, and the fewest unlabelled rows a group needs."""

    level: float = 0.95
    seed: int = 0
    estimator: str = "debiased"
    gates: tuple[str, ...] = ()
    inconclusive: str = "pass"
    min_group_rows: int = 100

    def __post_init__(self):
        check_estimator(self.estimator)

    def parsed_gates(self) -> list[Gate]:
        return [parse_gate(expr, ESTIMATES) for expr in self.gates]

    def recorded(self) -> dict:
        """The settings a state file records, which states must share to merge (gates aside)."""
        return {"level": self.level, "seed": self.seed, "estimator": self.estimator, "min_group_rows": self.min_group_rows}

    @classmethod
    def of_states(cls, recorded: list[dict], names: list[str]) -> EstimationSettings:
        """The settings of merged states (``recorded``: each file's), refused where they differ."""
        for settings, name in zip(recorded[1:], names[1:]):
            if settings != recorded[0]:
                raise InputError(f"{name}: estimated with other settings ({settings}) than {names[0]} ({recorded[0]})")
        return cls(**recorded[0])


@dataclass(frozen=True)
class GroupEstimate:
    name: str
    rows: int
    estimate: BatchEstimate


@dataclass
class EstimationReport:
    """The estimation of one batch (module docstring)."""

    source: dict
    whole: BatchEstimate
    estimates: dict[str, Estimate]
    #: The additive state the report was computed from (what ``--emit-state`` writes)
    state: BatchState
    labelled: dict | None = None
    test: CalibrationTest | None = None
    groups: list[GroupEstimate] = field(default_factory=list)
    gates: list[dict] = field(default_factory=list)

    @property
    def reliable(self) -> bool:
        return self.whole.reliable and (self.test is None or self.test.outcome != BROKEN)

    @property
    def reasons(self) -> list[str]:
        broken = [self.test.finding] if self.test is not None and self.test.outcome == BROKEN else []
        return [*self.whole.reasons, *broken]

    @property
    def passed(self) -> bool:
        return all(gate["passed"] for gate in self.gates)

    def to_json(self) -> dict:
        whole = self.whole.to_json()
        return {
            "input": self.source,
            "reliable": self.reliable,
            "reasons": self.reasons,
            "estimates": {key: estimate.to_json() for key, estimate in self.estimates.items()},
            "unlabelled": whole,
            **({"labelled": {**self.labelled, "test": self.test.to_json()}} if self.labelled is not None and self.test else {}),
            "groups": [
                {
                    "group": group.name,
                    "rows": group.rows,
                    "reliable": group.estimate.reliable,
                    "reasons": group.estimate.reasons,
                    "estimates": {key: e.to_json() for key, e in group.estimate.estimates.items()},
                }
                for group in self.groups
            ],
            "gates": self.gates,
        }


def merged_report(paths: list[str], min_group_rows: int | None = None) -> EstimationReport:
    """The estimation of the rows of the state files ``paths`` (written by an estimation's
    ``--emit-state``), merged, with the settings they share (``min_group_rows`` replacing theirs)."""
    from .state import BatchState, merge_states

    read = [BatchState.read(path) for path in paths]
    settings = EstimationSettings.of_states([recorded for _, recorded in read], paths)
    if min_group_rows is not None:
        settings = replace(settings, min_group_rows=min_group_rows)
    return report_of_state(merge_states([state for state, _ in read], paths), settings, {"path": f"{len(paths)} merged states"})


def _combined(estimate: Estimate, realised_mean: float, labelled: int, unlabelled: int) -> Estimate:
    """The whole batch's estimate: the labelled rows' realised mean beside the unlabelled rows' estimate."""
    n = labelled + unlabelled

    def mix(value: float) -> float:
        return (labelled * realised_mean + unlabelled * value) / n

    return replace(
        estimate, value=mix(estimate.value), lower=mix(estimate.lower), upper=mix(estimate.upper), sd=estimate.sd * unlabelled / n
    )


def _gate_entry(
    gate: Gate, estimate: Estimate | None, reliable: bool, reasons: list[str], settings: EstimationSettings, rows: int
) -> dict:
    entry = {"expr": gate.expr, "metric": gate.metric, "op": gate.op, "threshold": gate.threshold}
    if estimate is None:
        return decided(
            {**entry, "value": None, **noise_fields(None, None, gate.threshold, "no estimate")},
            outcome(None, None, gate.op, gate.threshold),
            settings.inconclusive,
        )
    spread = Spread(estimate.lower, estimate.upper, estimate.sd, rows, settings.level, NOISE)
    entry.update(value=estimate.value, **noise_fields(spread, estimate.value, gate.threshold, None))
    entry.pop("rows_to_settle", None)  # the map's share of the noise does not shrink with the batch's rows
    result = outcome(estimate.value, spread, gate.op, gate.threshold)
    if not reliable:
        entry["unreliable"] = reasons
        result = INCONCLUSIVE
    return decided(entry, result, settings.inconclusive)


def _check_gates(report: EstimationReport, settings: EstimationSettings, rows: int) -> list[dict]:
    results = []
    for gate in settings.parsed_gates():
        if gate.aggregate is None:
            results.append(_gate_entry(gate, report.estimates.get(gate.metric), report.reliable, report.reasons, settings, rows))
            continue
        if gate.aggregate not in ("max_group", "min_group"):
            raise UsageError(
                f"gate {gate.expr!r}: estimates are gated over groups (max_group:, min_group:), not labels", cli_hint="--fail-if"
            )
        per_group = [
            {
                "group": g.name,
                **_gate_entry(gate, g.estimate.estimates[gate.metric], g.estimate.reliable, g.estimate.reasons, settings, g.rows),
            }
            for g in report.groups
        ]
        overall = gate.over_groups([item["outcome"] for item in per_group])
        deciding = [item for item in per_group if item["outcome"] == overall]
        worst = (
            AGGREGATES[gate.aggregate](deciding, key=lambda item: item["value"]) if deciding else {"value": None, "group": None}
        )
        entry = {key: value for key, value in worst.items() if key not in ("outcome", "passed")}
        entry.update(aggregate=gate.aggregate, groups=len(per_group), per_group=per_group)
        results.append(decided(entry, overall, settings.inconclusive))
    return results


def estimate_report(
    probs: np.ndarray,
    logits: np.ndarray,
    labels: np.ndarray | None,
    reference: ReferenceRows | None,
    settings: EstimationSettings,
    *,
    groups=None,
    source: dict | None = None,
    first_row: int = 0,
) -> EstimationReport:
    """The estimation of a batch: its calibrated probabilities (n, K), uncalibrated log-space scores,
    labels (None, or with :data:`~calib.core.validation.MISSING_LABEL` where a row has none), the
    record of the map's reference rows, the settings, and the rows' groups
    (:class:`calib.evaluation.groups.Groups`, or None); the rows' global indices start at
    ``first_row`` (their sample keys, :mod:`.state`)."""
    settings.parsed_gates()  # a malformed gate is refused before any work
    state = BatchState.of(probs, logits, labels, reference, groups=groups, first_row=first_row)
    return report_of_state(state, settings, source)


def report_of_state(state: BatchState, settings: EstimationSettings, source: dict | None = None) -> EstimationReport:
    """The estimation of the rows a state holds (one batch's, or merged shards'), its gates checked."""
    settings.parsed_gates()
    whole = state.group(None)
    labelled, unlabelled = (int(whole.sums[name][0]) for name in ("labelled", "unlabelled"))
    if unlabelled < 2:
        raise InputError(
            f"{labelled} of {labelled + unlabelled} rows have labels: nothing is left to estimate; evaluate them instead"
        )

    def estimated_of(part: BatchState) -> BatchEstimate:
        return estimate_state(part, level=settings.level, seed=settings.seed, estimator=settings.estimator)

    estimated = estimated_of(whole)
    estimates, labelled_part, test = dict(estimated.estimates), None, None
    if labelled:
        values = {score: float(total) / labelled for score, total in zip(SCORES, whole.sums["realised_sums"][0])}
        for key in ESTIMATES:
            score = key.removeprefix("est_").removesuffix("_shifted")
            estimates[key] = _combined(estimated.estimates[key], values[score], labelled, unlabelled)
        known = whole.sample["labels"] != MISSING_LABEL
        if known.any():
            shifted = whole.sample["probs"][known] * (estimated.priors / estimated.reference_priors)
            test = calibration_test(shifted / shifted.sum(axis=1, keepdims=True), whole.sample["labels"][known], settings.level)
        labelled_part = {"rows": labelled, "realised": values}
    counts = {"rows": labelled + unlabelled, "labelled": labelled, "unlabelled": unlabelled}
    report = EstimationReport({**(source or {}), **counts}, estimated, estimates, state, labelled_part, test)
    if state.names != [""]:
        for code, name in enumerate(state.names):
            rows = int(state.sums["unlabelled"][code])
            if rows >= max(settings.min_group_rows, 2):
                report.groups.append(GroupEstimate(name, rows, estimated_of(state.group(code))))
    report.gates = _check_gates(report, settings, unlabelled)
    return report
