"""What a comparison is asked to do, as one value (the command line's flags and a notebook's
arguments alike), and the keys its gates may read."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError

# What the checks need (the gates' parser, the registry's top-k) loads with the first request, so
# that the command line reads the defaults below without the metric stack.

#: Fewest rows each batch (and each group compared) needs for the bootstrap and the isotonic fits
MIN_ROWS = 100
#: The proper score whose miscalibration term the decay test reads by default: log loss, which
#: weighs a confident wrong answer far more than Brier does, so a sharpened model's MCB rises by
#: many of its standard errors (docs/compare.md, "Measured"); "brier" is the other choice.
DECAY_SCORE = "log_loss"

_TERM_KEYS = {
    "miscalibration_increase": ("mcb", 1),
    "discrimination_decrease": ("dsc", -1),
    "uncertainty_change": ("unc", 1),
    "score_change": ("score", 1),
    "recalibrated_score_increase": ("recalibrated", 1),
}


def gate_keys(top_k=None) -> dict[str, tuple[str, int]]:
    """{gate key: (the quantity it reads, +1 where it is the change NEW - REF, -1 where REF - NEW)}:
    every key is oriented so that larger is worse. The top-label Brier terms keep the short names
    (``miscalibration_increase``); the log-loss ones take ``log_loss_``, the class-wise Brier
    decomposition's ``classwise_``; ``prior_shift`` is the L1 distance of the class priors, the one
    key read without labels on NEW."""
    if top_k is None:
        from ..metrics.definitions import TOP_K as top_k
    keys = {
        "accuracy_decrease": ("accuracy", -1),
        "class_accuracy_decrease": ("class_accuracy", -1),
        **{f"top{k}_accuracy_decrease": (f"top{k}_accuracy", -1) for k in top_k},
        "brier_increase": ("brier", 1),
        "nll_increase": ("nll", 1),
    }
    for prefix, problem, score in (
        ("", "top_label", "brier"),
        ("log_loss_", "top_label", "log_loss"),
        ("classwise_", "classwise", "brier"),
    ):
        for name, (term, sign) in _TERM_KEYS.items():
            if problem == "classwise" and term == "score":  # the class-wise Brier score is the multiclass Brier: brier_increase
                continue
            keys[prefix + name] = (f"{problem}.{score}.{term}", sign)
    keys["prior_shift"] = ("prior_shift", 1)
    return keys


#: The one gate key that needs no labels on NEW
UNLABELLED_KEYS = ("prior_shift",)


@dataclass(frozen=True)
class ComparisonRequest:
    """One comparison's settings (docs/compare.md).

    ``replicates`` bootstrap replicates of each batch (at least 2 / (1 - ``level``), so that one lies
    beyond each end of an interval), ``level`` of the intervals and 1 - the size of the verdict's
    tests, ``seed`` of the replicates and of the remedies' held-out halves, ``gates`` ("KEY>T",
    "max_group:KEY>T", keys of :data:`GATE_KEYS`, or :class:`calib.evaluation.gates.Gate`) and what
    an inconclusive one counts as (``inconclusive``), ``decay_score`` whose miscalibration the decay
    test reads, and ``top_k``: the k of the top-k accuracies compared (a gated one is added)."""

    replicates: int = 200
    level: float = 0.99
    seed: int = 0
    gates: tuple = ()
    inconclusive: str = "pass"
    decay_score: str = DECAY_SCORE
    top_k: tuple[int, ...] = field(default=())

    def __post_init__(self):
        from ..bootstrap import check_level, check_tail_replicates
        from ..evaluation.gate_noise import INCONCLUSIVE_POLICIES
        from ..evaluation.gate_parsing import parse_gate
        from ..evaluation.gates import Gate
        from ..metrics.definitions import TOP_K
        from .decomposition import SCORES

        check_level(self.level)
        if isinstance(self.replicates, bool) or not isinstance(self.replicates, int) or self.replicates < 2:
            raise UsageError(f"a comparison takes a count of bootstrap replicates of at least 2; got {self.replicates!r}")
        check_tail_replicates(self.replicates, self.level)
        if self.decay_score not in SCORES:
            raise UsageError(
                f"decay score must be one of {', '.join(SCORES)}; got {self.decay_score!r}", cli_hint="--decay-score"
            )
        if self.inconclusive not in INCONCLUSIVE_POLICIES:
            raise UsageError(
                f"inconclusive must be one of {', '.join(INCONCLUSIVE_POLICIES)}; got {self.inconclusive!r}",
                cli_hint="--inconclusive pass|fail",
            )
        gates = (self.gates,) if isinstance(self.gates, (str, Gate)) else tuple(self.gates)
        every_key = gate_keys()
        gates = tuple(parse_gate(gate, every_key) if isinstance(gate, str) else gate for gate in gates)
        object.__setattr__(self, "gates", gates)
        asked = tuple(self.top_k)
        wrong = [k for k in asked if k not in TOP_K]
        if wrong:
            raise UsageError(
                f"top-k accuracy is compared for k in {', '.join(map(str, TOP_K))}; got {wrong[0]!r}", cli_hint="--top-k"
            )
        gated = [int(every_key[g.metric][0][3:].split("_")[0]) for g in gates if g.metric.startswith("top")]
        object.__setattr__(self, "top_k", tuple(sorted(set(asked) | set(gated))))

    @property
    def keys(self) -> dict[str, tuple[str, int]]:
        """The gate keys of this comparison: those of the top-k accuracies it compares only."""
        return gate_keys(self.top_k)

    @property
    def needs_labels(self) -> list[str]:
        """The gated keys that need labels on NEW."""
        return [gate.metric for gate in self.gates if gate.metric not in UNLABELLED_KEYS]


def __getattr__(name):
    if name == "GATE_KEYS":  # every gate key and what it reads, built on first use (the registry's top-k)
        return gate_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
