"""What an evaluation is asked to do, as one value that every caller builds.

``calib.evaluate`` in a notebook, ``calib evaluate FILE`` and ``calib evaluate DIR`` on the command
line, ``calib diagnose`` and the GitHub Action all describe their evaluation as an
:class:`EvaluationRequest` and hand it to :func:`calib.evaluation.build_report` (or, for shards,
:func:`calib.shards.evaluate_shards`). Every default and policy lives here or below: the metrics of
the default table, the bins, V-ECE's settings, when bootstrap replicates are drawn (with gates, or
for a report kept as a later baseline), the gates and what an inconclusive one counts as. So the
same request on the same rows gives the same report, whoever asked.

The flat option names of :meth:`EvaluationRequest.of` are the keyword arguments of
``calib.evaluate`` and, with dashes, the flags of ``calib evaluate``.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..bootstrap import BootstrapConfig, check_level, resolve_config
from ..errors import UsageError
from ..metrics import check_metric_keys
from ..metrics.definitions import AUTO_BINS, bin_count
from ..metrics.sample import DEFAULT_RECIPE, SampleConfig
from .gate_noise import INCONCLUSIVE_POLICIES
from .gate_parsing import parse_change_gates, parse_gate
from .gates import ChangeGate, Gate


def as_gates(gates: Sequence[str | Gate] | str | Gate) -> tuple[Gate, ...]:
    """Threshold gates, given as text (``"cmce>0.01"``) or :class:`Gate`, one or a sequence."""
    if isinstance(gates, (str, Gate)):  # one gate, not a sequence of characters
        gates = (gates,)
    return tuple(parse_gate(gate) if isinstance(gate, str) else gate for gate in gates)


@dataclass(frozen=True)
class GateSettings:
    """The gates and how they read the noise (docs/ci-gates.md).

    ``thresholds``: threshold gates, as text (``"cmce>0.01"``, ``"max_group:ece>0.05"``) or
    :class:`Gate`; ``changes``: change gates against a baseline report
    (:func:`calib.evaluation.parse_change_gates` reads it); ``ignore_noise``: compare the values
    themselves (pass or fail) instead of their bootstrap intervals (pass, fail or inconclusive);
    ``inconclusive``: what an inconclusive gate counts as, "pass" or "fail"."""

    thresholds: tuple[Gate, ...] = ()
    changes: tuple[ChangeGate, ...] = ()
    ignore_noise: bool = False
    inconclusive: str = "pass"

    def __post_init__(self):
        object.__setattr__(self, "thresholds", as_gates(self.thresholds))
        object.__setattr__(self, "changes", tuple(self.changes))
        if self.inconclusive not in INCONCLUSIVE_POLICIES:
            raise UsageError(
                f"inconclusive must be one of {', '.join(INCONCLUSIVE_POLICIES)}; got {self.inconclusive!r}",
                cli_hint="--inconclusive pass|fail",
            )
        if self.ignore_noise and any(gate.paired for gate in self.changes):
            raise UsageError(
                "a paired change gate reads the bootstrap's intervals and ignore_noise the raw values; choose one of the two",
                cli_hint="--paired or --ignore-noise",
            )

    @property
    def any(self) -> bool:
        """Whether there is a gate at all."""
        return bool(self.thresholds or self.changes)

    @property
    def metrics(self) -> list[str]:
        """The gated metric keys, in the gates' order."""
        return [gate.metric for gate in self.thresholds] + [gate.metric for gate in self.changes]

    @property
    def baseline_replicates(self) -> BootstrapConfig | None:
        """The baseline report's replicates (their count, seed and level), when change gates have a
        baseline with some: a report that pairs with it draws as many with the same seed."""
        found = self.changes[0].baseline_bootstrap if self.changes else None
        if found is None or not found.replicates:
            return None
        return BootstrapConfig(int(found.replicates), int(found.seed or 0), found.level)


@dataclass(frozen=True)
class BootstrapSettings:
    """When and how bootstrap replicates are drawn (:func:`calib.bootstrap.resolve_config`).

    ``replicates``: "auto" (the default) draws them when the request has gates, so that the gates
    read the noise, or ``keep_as_baseline`` (a report that later change gates pair with): 200 on
    inputs of up to 2,000 classes, or a baseline report's count and seed; a count N (0: none); or a
    :class:`BootstrapConfig`. ``level``: the intervals' confidence level; ``seed``: the resampling's.
    ``first_row``: the global index of the input's first row, a shard's place among all rows: each
    row's cluster is keyed by its global index (:func:`calib.bootstrap.row_clusters`), so shards
    evaluated with their first rows merge into the replicates of one evaluation of all rows."""

    replicates: int | str | BootstrapConfig = "auto"
    seed: int = 0
    level: float = 0.95
    keep_as_baseline: bool = False
    first_row: int = 0

    def __post_init__(self):
        check_level(self.level)
        if isinstance(self.first_row, bool) or not isinstance(self.first_row, numbers.Integral) or self.first_row < 0:
            raise UsageError(f"first_row is the global index of the input's first row, 0 or more; got {self.first_row!r}")

    def may_draw(self, gates: GateSettings, state_written: bool = False) -> bool:
        """Whether :meth:`resolve` may draw replicates, before the input's size is known (its
        answer for the smallest input)."""
        return self.resolve(1, 1, gates, state_written) is not None

    def resolve(self, n_rows: int, n_classes: int, gates: GateSettings, state_written: bool = False) -> BootstrapConfig | None:
        """The replicates of an evaluation of ``n_rows`` x ``n_classes`` scores with ``gates``; None
        for none. A metric state file (``state_written``) is recorded like a baseline: its per-cluster
        sums give merged states their intervals."""
        return resolve_config(
            self.replicates,
            n_rows,
            n_classes,
            seed=self.seed,
            level=self.level,
            gated=gates.any,
            baseline=gates.baseline_replicates,
            recorded=self.keep_as_baseline or state_written,
        )


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation's settings (docs/api.md, docs/cli.md).

    ``metrics``: metric keys, or None for the default table (which depends on the input: multiclass,
    binary, multi-label, with true probabilities); gated metrics are always computed. ``bins``,
    ``cmce_bins``: equal-width bins of the binned errors and of CMCE, a count or "auto"
    (:func:`calib.metrics.definitions.auto_bins`). ``vece``: add the V-ECE family to the default
    table, estimated with ``vece_settings``. ``min_group_rows``: groups with fewer rows are listed but
    not gated. ``emit_state``: also write the additive metric state file there (for merging shards)."""

    metrics: tuple[str, ...] | None = None
    bins: int | str = 15
    cmce_bins: int | str = 25
    vece: bool = False
    vece_settings: SampleConfig = field(default_factory=SampleConfig)
    gates: GateSettings = field(default_factory=GateSettings)
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    min_group_rows: int = 100
    emit_state: str | None = None

    def __post_init__(self):
        metrics = self.metrics
        if isinstance(metrics, str):  # one key, not a sequence of one-letter keys
            metrics = [metrics]
        if metrics is not None:
            object.__setattr__(self, "metrics", tuple(check_metric_keys(list(metrics))))
        for name in ("bins", "cmce_bins"):
            if getattr(self, name) != AUTO_BINS:
                object.__setattr__(self, name, bin_count(getattr(self, name), 1, name))
        if self.min_group_rows < 1:
            raise UsageError(f"min_group_rows must be a positive count of rows; got {self.min_group_rows!r}")

    @classmethod
    def of(
        cls,
        *,
        metrics: Sequence[str] | str | None = None,
        bins: int | str = 15,
        cmce_bins: int | str = 25,
        vece: bool = False,
        min_group_rows: int = 100,
        emit_state: str | None = None,
        gates: Sequence[str | Gate] = (),
        increase_gates: Sequence[ChangeGate] = (),
        max_increase: Sequence[str] = (),
        max_decrease: Sequence[str] = (),
        baseline: str | None = None,
        paired: bool = False,
        ignore_noise: bool = False,
        inconclusive: str = "pass",
        bootstrap: str | int | BootstrapConfig = "auto",
        seed: int = 0,
        level: float = 0.95,
        keep_as_baseline: bool = False,
        first_row: int = 0,
        vece_recalibrator: str = "ws-catboost",
        vece_max_rows: int = 20_000,
        vece_recipe: str = DEFAULT_RECIPE,
    ) -> EvaluationRequest:
        """A request from flat settings, each by name: the request's own fields (``metrics``,
        ``bins``, ``cmce_bins``, ``vece``, ``min_group_rows``, ``emit_state``), ``gates``,
        ``increase_gates``, ``ignore_noise``, ``inconclusive`` (:class:`GateSettings`; change gates
        also as text, ``max_increase`` / ``max_decrease`` ``METRIC=AMOUNT`` against the report at
        ``baseline``, ``paired`` on its replicates: :func:`calib.evaluation.parse_change_gates`),
        ``bootstrap``, ``level``, ``keep_as_baseline``, ``first_row`` (:class:`BootstrapSettings`),
        ``seed`` (of the bootstrap and of V-ECE's folds and subsample), ``vece_recalibrator``,
        ``vece_max_rows``, ``vece_recipe`` (:class:`calib.metrics.sample.SampleConfig`).

        >>> EvaluationRequest.of(metrics="ece", bootstrap=50, level=0.9).bootstrap.replicates
        50
        """
        return cls(
            metrics=None if metrics is None else tuple([metrics] if isinstance(metrics, str) else metrics),
            bins=bins,
            cmce_bins=cmce_bins,
            vece=vece,
            min_group_rows=min_group_rows,
            emit_state=emit_state,
            gates=GateSettings(
                as_gates(gates),
                (*increase_gates, *parse_change_gates(max_increase, baseline, paired, max_decrease)),
                ignore_noise,
                inconclusive,
            ),
            bootstrap=BootstrapSettings(bootstrap, seed, level, keep_as_baseline, first_row),
            vece_settings=SampleConfig(vece_recalibrator, seed, vece_max_rows, vece_recipe),
        )


def flat_names() -> set[str]:
    """The flat setting names :meth:`EvaluationRequest.of` maps onto the request."""
    return set(inspect.signature(EvaluationRequest.of).parameters)
