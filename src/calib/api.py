"""The Python API: what notebooks and the command line call.

Arrays are NumPy (N, K) scores (logits, probabilities or log-probabilities: ``kind`` says which,
or "auto" detects it exactly as the command line does) and (N,) integer labels; every entry point
also takes a :class:`calib.io.Predictions` read from a file. Errors are :class:`calib.InputError` /
:class:`calib.UsageError`, both ValueErrors.

>>> import numpy as np, calib
>>> data = np.load(calib.sample_path("cifar10_val.npz"))
>>> ts = calib.calibrator("ts").fit(data["logits"], data["labels"])
>>> round(ts.fitted.temperature_, 4)
1.1714
>>> test = np.load(calib.sample_path("cifar10_test.npz"))
>>> report = calib.evaluate(test["logits"], test["labels"], metrics=["ece", "cmce"], calibrator=ts)
>>> round(report.values["ece"], 6), round(report.uncalibrated_values["ece"], 6)
(0.012938, 0.025642)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import pipeline
from .calibrators.base import Calibrator
from .core.validation import check_true_probs
from .errors import InputError, NotFittedError, UsageError
from .io.predictions import Predictions
from .io.readers import predictions_from_arrays
from .registry import CALIBRATORS as CALIBRATORS  # re-exported: the command line reads the registries here
from .registry import OPTION_CHOICES as OPTION_CHOICES
from .registry import choices_text as choices_text

if TYPE_CHECKING:
    from .estimation import ReferenceRows
    from .estimation.report import EstimationReport, EstimationSettings
    from .evaluation import EvaluationReport
    from .evaluation.request import EvaluationRequest


def _reference_record(calibrator: Calibrator, preds: Predictions, features, seed: int) -> ReferenceRows | None:
    """The record of the labelled rows ``calibrator`` was fitted on that estimates without labels
    need (calib.estimation.reference.ReferenceRows), or None for a multi-label input."""
    from .estimation.reference import ReferenceRows

    if preds.labels is None or preds.output_layout.n_labels is not None:
        return None
    probs = pipeline.apply_calibrator(calibrator, preds, "probs", features)[0]
    return ReferenceRows.of(probs, preds.logits(), preds.labels, seed)


def sample_path(name: str) -> str:
    """Path of a file of the bundled sample data, for examples.

    Parameters
    ----------
    name : str
        ``cifar10_val.npz`` or ``cifar10_test.npz``.

    Returns
    -------
    str
        The file in ``sample_data/`` of the source checkout the package runs from, else of the
        current folder (a checkout with calib installed from it).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.join(here, "..", "..", "sample_data"), os.path.join(os.getcwd(), "sample_data")):
        path = os.path.normpath(os.path.join(root, name))
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"sample data {name!r} is not installed with this copy of calib")


def as_predictions(scores, labels=None, *, kind: str = "auto", task: str = "auto") -> Predictions:
    """``scores`` as validated :class:`Predictions` (a Predictions is returned as it is, with
    ``labels`` attached when given); labels of the scores' (N, L) shape make a multi-label input."""
    if isinstance(scores, Predictions):
        if labels is not None:
            from .core.validation import as_array, check_labels

            scores.labels = check_labels(as_array(labels, "labels"), scores.n, scores.k, "labels")
        return scores
    return predictions_from_arrays(scores, labels, kind=kind, task=task)


class Calibration:
    """A calibration method by name with its options: ``fit`` it on scores and labels, then
    ``predict_proba`` / ``predict_sets`` on new scores, ``save`` it as a bundle directory.

    >>> import numpy as np, calib
    >>> data = np.load(calib.sample_path("cifar10_val.npz"))
    >>> mr = calib.calibrator("mr", alpha=0.1).fit(data["logits"], data["labels"])
    >>> sets = mr.predict_sets(data["logits"][:3])
    >>> sets.shape, sets.dtype
    ((3, 10), dtype('bool'))
    >>> probs = mr.predict_proba(data["logits"][:3])
    >>> bool(np.allclose(probs.sum(axis=1), 1.0))
    True
    """

    def __init__(self, method: str, per_label: bool = False, joint: bool = False, **options):
        from .registry import calibrator_class

        self.method = method
        #: One calibrator per label of a multi-label input (else one for all of its pairs).
        self.per_label = per_label
        #: A conformal method's sets of a multi-label input covering every label of a row at once.
        self.joint = joint
        cls = calibrator_class(method)
        self.fitted: Calibrator = cls(cls.parse_options(options))  # options checked now, not at fit
        self.input_kind: str | None = None
        self.n_classes: int | None = None
        self.fitted_on: dict | None = None
        #: What an estimate without labels needs of the rows it was fitted on (calib.estimation)
        self.reference: ReferenceRows | None = None
        self.seed = 0
        #: The sha256 of the bundle it was loaded from (None for a calibrator fitted here).
        self.bundle_sha256: str | None = None
        #: L, for a calibrator fitted on a multi-label input's (row, label) pairs.
        self.n_labels: int | None = None
        #: The torch device that trained it (a torch-trained method fitted here), else None.
        self.device: str | None = None

    @property
    def trains_with_torch(self) -> bool:
        """Whether the method, with its options, trains a torch model at its fit (and so takes a
        ``device``): adaptive-ts, ats-aq, ats-maq, an adaptive or quantile-regression threshold."""
        from .registry import calibrator_class

        cls = calibrator_class(self.method)
        return "torch" in cls.requires or cls(cls.parse_options(self.options)).trains_a_model()

    def __repr__(self) -> str:
        state = "fitted" if self.input_kind is not None else "not fitted"
        return f"calib.calibrator({self.method!r}, {self.options}) [{state}]"

    @property
    def options(self) -> dict:
        return dataclasses.asdict(self.fitted.options)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters (scikit-learn's estimator protocol, so ``sklearn.base.clone``
        makes an unfitted copy): method, per_label, joint and every option of the method."""
        return {"method": self.method, "per_label": self.per_label, "joint": self.joint, **self.options}

    def set_params(self, **params) -> "Calibration":
        """Change parameters (scikit-learn's protocol): the options are checked as the constructor
        checks them, and the calibrator is unfitted again."""
        merged = {**self.get_params(), **params}
        unfitted = Calibration(merged.pop("method"), merged.pop("per_label"), merged.pop("joint"), **merged)
        vars(self).update(vars(unfitted))
        return self

    def fit(
        self,
        scores,
        labels=None,
        *,
        seed: int = 0,
        features: np.ndarray | None = None,
        kind: str = "auto",
        train=None,
        train_features: np.ndarray | None = None,
        device: str = "auto",
    ) -> "Calibration":
        """Fit the method on calibration rows (checked as the command line checks a file).

        Parameters
        ----------
        scores : array_like, (N, K)
            Logits, probabilities or log-probabilities (``kind``, detected when "auto"), or
            validated :class:`calib.io.Predictions`.
        labels : array_like, (N,)
            Integer labels in [0, K).
        seed : int
            Seed of every random choice of the fit.
        features : ndarray (N, d), optional
            Per-row features the methods with an adaptive threshold condition on.
        kind : str
            "auto", "logits", "probs" or "log-probs".
        train : (scores, labels) or Predictions, optional
            Separate labelled rows on which ats-aq, ats-maq and the adaptive threshold fit their
            model, every calibration row then conformalising it; without them those methods split
            the calibration rows in seeded halves.
        train_features : ndarray, optional
            The features of ``train``'s rows (with ``features``).
        device : str
            Where the torch-trained methods (``Calibration.trains_with_torch``) train: "auto" (a
            GPU where torch sees one, else the CPU), "cpu", or "cuda" ("cuda:N"). The parameters
            come back to the CPU, so the bundle applies anywhere; ``self.device`` says which
            device trained it (None for the other methods, which never use torch).

        Returns
        -------
        Calibration
            self, fitted.
        """
        preds = as_predictions(scores, labels, kind=kind)
        if train is not None and not isinstance(train, Predictions):
            train_scores, train_labels = train
            train = as_predictions(train_scores, train_labels, kind=kind)
        from .core.extras import check_device_name, training_device

        check_device_name(device)
        torch_method = self.trains_with_torch
        if device != "auto" and not torch_method:
            raise UsageError(
                f"method {self.method!r} trains no model on a device, so device {device!r} does not apply "
                "(only the torch-trained methods take one)",
                cli_hint="--device",
            )
        with training_device(device if torch_method else "cpu") as used:
            self.fitted = pipeline.fit_calibrator(
                preds,
                self.method,
                self.options,
                seed=seed,
                features=features,
                train=train,
                train_features=train_features,
                per_label=self.per_label,
                joint=self.joint,
            )
        self.device = used if torch_method else None
        self.input_kind, self.n_classes, self.seed = preds.kind, preds.k, seed
        self.bundle_sha256 = None
        self.n_labels = preds.output_layout.n_labels
        self.fitted_on = {"n": preds.n, "sha256": preds.sha256}
        self.reference = _reference_record(self.fitted, preds, features, seed)
        return self

    def _inputs(self, scores, kind: str) -> Predictions:
        task = "multilabel" if self.n_labels is not None else "auto"
        preds = as_predictions(scores, kind=self.input_kind if kind == "auto" and self.input_kind else kind, task=task)
        self.check_applies(preds)
        return preds

    def check_applies(self, preds: Predictions) -> None:
        """Refuse inputs this calibrator cannot apply to: it is not fitted, or ``preds`` has another
        class count or input kind than it was fitted on."""
        n_classes, input_kind, _ = self._fitted_facts("fit it (or load a bundle) first")
        pipeline.check_fits(preds, n_classes, input_kind, f"the {self.method} calibrator", self.n_labels, self.fitted)

    def _fitted_facts(self, remedy: str) -> tuple[int, str, dict]:
        """(class count, input kind, rows fitted on) of a fitted calibrator; else an error saying
        it is not fitted yet and the ``remedy``."""
        if self.input_kind is None or self.n_classes is None or self.fitted_on is None:
            raise NotFittedError(f"calibrator {self.method!r} is not fitted yet: {remedy}")
        return self.n_classes, self.input_kind, self.fitted_on

    def predict_proba(self, scores, *, features: np.ndarray | None = None, kind: str = "auto") -> np.ndarray:
        """Calibrated probabilities of new scores.

        Parameters
        ----------
        scores : array_like, (N, K)
            Scores of the kind the calibrator was fitted on.
        features : ndarray (N, d), optional
            Per-row features, for a method fitted with them.
        kind : str
            The kind of ``scores``; "auto" takes the fitted one.

        Returns
        -------
        ndarray, (N, K)
            Each row sums to 1; for a calibrator fitted on a multi-label input, (N, L) of each
            label's P(y_l = 1).
        """
        return pipeline.apply_calibrator(self.fitted, self._inputs(scores, kind), "probs", features)[0]

    def predict_log_proba(self, scores, *, features: np.ndarray | None = None, kind: str = "auto") -> np.ndarray:
        """Calibrated log-probabilities of new scores; parameters as :meth:`predict_proba`.

        Returns
        -------
        ndarray, (N, K)
        """
        return pipeline.apply_calibrator(self.fitted, self._inputs(scores, kind), "log-probs", features)[0]

    def predict_sets(self, scores, *, features: np.ndarray | None = None, kind: str = "auto") -> np.ndarray:
        """The conformal sets C(x) of new scores (methods that build sets); parameters as
        :meth:`predict_proba`.

        Returns
        -------
        ndarray of bool, (N, K)
            True where the class is in the row's set; for a multi-label input, (N, L) int8 codes of
            each label's set over {0, 1}: 0 {0}, 1 {1}, 2 {0, 1}, -1 empty
            (:data:`calib.io.predictions.LABEL_SET_CODES`).
        """
        return pipeline.apply_calibrator(self.fitted, self._inputs(scores, kind), "sets", features)[0]

    def fitted_shape(self, preds: Predictions) -> dict[str, str]:
        """The rows the fit's summary table names: "rows x classes", or for a multi-label input
        "rows x labels" and whether one calibrator per label or one for all labels was fitted."""
        layout = preds.output_layout
        if layout.n_labels is None:
            return {"rows x classes": f"{preds.n} x {preds.k} ({preds.kind})"}
        fitted = f"one calibrator per label ({layout.n_labels})" if self.per_label else "one calibrator for all labels"
        return {"rows x labels": f"{layout.n_rows} x {layout.n_labels} ({preds.n} pairs, {preds.kind})", "fitted": fitted}

    def fit_report(self) -> dict:
        """The fitted parameters and counts (as printed by ``calib fit`` and kept in the bundle)."""
        return pipeline.full_fit_report(self.fitted)

    def summary(self, preds: Predictions, train: Predictions | None = None, bundle: str | None = None) -> dict:
        """The fit's summary, the JSON of ``calib fit --json``: version, method, options, the rows it
        was fitted on (``preds``; ``train``, the training rows of a model, when given), the fit
        report, the warnings and the bundle it was saved to.

        >>> import numpy as np, calib
        >>> val = np.load(calib.sample_path("cifar10_val.npz"))
        >>> preds = calib.api.as_predictions(val["logits"], val["labels"])
        >>> summary = calib.calibrator("ts").fit(preds).summary(preds)
        >>> summary["method"], summary["input"]["n"], round(summary["fit_report"]["temperature"], 4)
        ('ts', 5000, 1.1714)
        """
        from ._version import __version__

        fitted = self.fitted
        return {
            "calib_version": __version__,
            "method": self.method,
            "options": dataclasses.asdict(fitted.options),
            "input": {"path": preds.name, "kind": preds.kind, "n": preds.n, "k": preds.k},
            **({"train": {"path": train.name, "n": train.n}} if train is not None else {}),
            "fit_report": pipeline.full_fit_report(fitted),
            **({"device": self.device} if self.device is not None else {}),
            "warnings": fitted.fit_warnings(),
            "bundle": bundle,
        }

    def save(self, path: str, *, force: bool = False) -> dict:
        """Write the bundle directory (manifest, arrays, hashes; no pickle).

        Parameters
        ----------
        path : str
            The directory; an existing non-empty one is replaced only with ``force``.
        force : bool

        Returns
        -------
        dict
            The manifest written.
        """
        n_classes, input_kind, fitted_on = self._fitted_facts("nothing to save")
        return pipeline.save_calibrator(
            self.fitted,
            path,
            n_classes=n_classes,
            input_kind=input_kind,
            fitted_on=fitted_on,
            seed=self.seed,
            force=force,
            n_labels=self.n_labels,
            record=self._record(),
        )

    def _record(self) -> tuple[dict, dict[str, np.ndarray]] | None:
        """The record of the reference rows as a bundle keeps it (its manifest entry, its arrays)."""
        return None if self.reference is None else (self.reference.to_manifest(), self.reference.arrays())

    def to_onnx(self, path: str | None = None, *, dtype: str = "float32") -> bytes:
        """The fitted calibrator as an ONNX graph (docs/export.md): scores in, calibrated ``probs``
        out (and ``sets`` for a conformal method), computed in float64; needs ``onnx``.

        Parameters
        ----------
        path : str, optional
            Where to write the model (atomically); it is returned either way.
        dtype : str
            "float32" or "float64": the input's and the ``probs`` output's dtype.

        Returns
        -------
        bytes
            The serialised ONNX model; its metadata holds the method, options and the bundle's sha256.
        """
        from .bundle import bundle_sha256
        from .io.atomic import write_bytes_atomic

        n_classes, input_kind, fitted_on = self._fitted_facts("nothing to export")
        manifest, state = pipeline.bundle_parts(
            self.fitted,
            n_classes=n_classes,
            input_kind=input_kind,
            fitted_on=fitted_on,
            seed=self.seed,
            n_labels=self.n_labels,
            record=self._record(),
        )
        model = pipeline.export_onnx(self.fitted, manifest, self.bundle_sha256 or bundle_sha256(manifest, state), dtype)
        if path is not None:
            write_bytes_atomic(path, model)
        return model


def calibrator(name: str, per_label: bool = False, joint: bool = False, **options) -> Calibration:
    """A calibration method by its name, not yet fitted.

    Parameters
    ----------
    name : str
        A method of ``calib methods`` (``ts``, ``mr``, ``ats-gq``, ...).
    per_label : bool
        For a multi-label input: one calibrator per label (else one shared by all labels); a
        conformal method's sets then cover each label with probability >= 1 - alpha.
    joint : bool
        For a conformal method on a multi-label input: sets that cover every label of a row at
        once with probability >= 1 - alpha (docs/multilabel.md).
    **options
        The method's options, as the command line's (``alpha=0.1, score="aps"``); checked now.

    Returns
    -------
    Calibration
    """
    return Calibration(name, per_label=per_label, joint=joint, **options)


def load(path: str) -> Calibration:
    """A fitted calibrator from a bundle directory.

    Parameters
    ----------
    path : str
        A directory written by ``calib fit`` or :meth:`Calibration.save`; every file's hash is
        verified.

    Returns
    -------
    Calibration
        Fitted, ready to ``predict_proba``.
    """
    fitted, bundle = pipeline.load_calibrator(path)
    options = {k: v for k, v in bundle.manifest["options"].items() if k != "seed"}
    result = Calibration(
        bundle.method,
        per_label=bool(bundle.manifest.get("per_label", False)),
        joint=bundle.manifest.get("coverage") == "joint",
        **options,
    )
    result.fitted, result.input_kind, result.n_classes = fitted, bundle.input_kind, bundle.n_classes
    result.fitted_on, result.seed = bundle.manifest["fitted_on"], bundle.manifest["options"].get("seed", 0)
    result.bundle_sha256 = bundle.sha256
    result.n_labels = bundle.manifest.get("n_labels")
    from .estimation.reference import ReferenceRows

    result.reference = ReferenceRows.from_bundle(bundle.manifest, bundle.state.arrays, path)
    return result


@dataclasses.dataclass
class Report:
    """An evaluation: ``values`` {metric key: value}, ``uncalibrated_values`` when a calibrator
    was applied, ``passed`` (the gates), ``entries`` the typed report
    (calib.evaluation.EvaluationReport: metric entries with their settings and intervals, groups,
    gate results), ``to_dict()`` the JSON report of ``calib evaluate``, ``table()`` the same as text."""

    entries: EvaluationReport

    @property
    def values(self) -> dict[str, float | None]:
        return self.entries.values

    @property
    def uncalibrated_values(self) -> dict[str, float | None] | None:
        before = self.entries.uncalibrated
        return None if before is None else {key: entry.value for key, entry in before.items()}

    @property
    def passed(self) -> bool:
        return self.entries.passed

    @property
    def group_values(self) -> dict[str, dict[str, float | None]] | None:
        """{group: {metric key: value}} when the rows were grouped, else None."""
        groups = self.entries.groups
        return None if groups is None else {name: dict(entry.metrics) for name, entry in groups.groups.items()}

    def to_dict(self) -> dict:
        return self.entries.to_json()

    def table(self) -> str:
        from .reporting.text import report_lines

        return "\n".join(report_lines(self.entries))

    def __repr__(self) -> str:
        return self.table()


def estimate(
    scores,
    labels=None,
    *,
    calibrator: Calibration,
    settings: EstimationSettings | None = None,
    groups=None,
    kind: str = "auto",
    features: np.ndarray | None = None,
    source: dict | None = None,
    first_row: int = 0,
) -> EstimationReport:
    """Estimate what a batch without labels (or with some) will score once its labels arrive: its
    accuracy, log loss and Brier score under the calibrated model, as calibrated and under the
    batch's own class priors, each with an interval, and whether the estimates can be trusted
    (docs/estimation.md).

    Parameters
    ----------
    scores : array_like (N, K), or Predictions
        The batch's scores, of the kind the calibrator was fitted on.
    labels : array_like (N,), optional
        Labels where some rows have them, -1 (or NaN) where a row has none; the labelled rows count
        as what they realised and test whether the calibration map still holds.
    calibrator : Calibration
        Fitted (``calib.calibrator("ts").fit(ref_scores, ref_labels)``, a reference file's
        labelled rows) or loaded from a bundle: it keeps the record of the rows it was fitted on
        that the intervals and checks need.
    settings : EstimationSettings, optional
        Level, seed, estimator ("debiased" or "cbpe"), gates on the estimates
        (``est_accuracy<0.9``), what an inconclusive gate counts as, the fewest rows of a group.
    groups : calib.evaluation.groups.Groups, optional
        Each row's group: estimates per group too.
    first_row : int
        The global index of the first row (a shard's), which keys the rows' uniform sample: the
        reports' ``state`` of shards merge into the numbers of all rows
        (:func:`calib.estimation.state.merge_states`).

    Returns
    -------
    calib.estimation.report.EstimationReport
        ``estimates`` {key: Estimate}, ``reliable`` and ``reasons``, ``gates``, ``to_json()``.

    >>> import numpy as np, calib
    >>> val, test = (np.load(calib.sample_path(f"cifar10_{part}.npz")) for part in ("val", "test"))
    >>> ts = calib.calibrator("ts").fit(val["logits"], val["labels"])
    >>> report = calib.estimate(test["logits"], calibrator=ts)
    >>> round(report.estimates["est_accuracy"].value, 3), report.reliable
    (0.947, True)
    """
    from .estimation.report import EstimationSettings, report_of_state

    settings = settings or EstimationSettings()
    settings.parsed_gates()  # a malformed gate is refused before any work
    state = estimation_state(
        scores, labels, calibrator=calibrator, groups=groups, kind=kind, features=features, first_row=first_row
    )
    return report_of_state(state, settings, source)


def estimation_state(
    scores, labels=None, *, calibrator: Calibration, groups=None, kind: str = "auto", features=None, first_row: int = 0
):
    """The additive state (calib.estimation.state.BatchState) behind :func:`estimate` of a batch (a
    shard's, its rows' global indices from ``first_row``); parameters as :func:`estimate`'s."""
    from .core.validation import as_array, check_labels
    from .estimation.state import batch_state

    preds = as_predictions(scores, kind=kind)
    if preds.answers:
        raise InputError(
            f"{preds.name}: stated confidences in answers are not estimated without labels yet (the estimates read "
            "each row's most probable class); evaluate the labelled rows"
        )
    calibrator.check_applies(preds)
    if labels is not None:
        preds.labels = check_labels(as_array(labels, "labels"), preds.n, preds.k, "labels", missing=-1)
    return batch_state(
        calibrator.fitted,
        calibrator.reference,
        preds,
        groups=groups,
        features=features,
        first_row=first_row,
        n_labels=calibrator.n_labels,
    )


def evaluate(
    scores,
    labels=None,
    *,
    metrics: Sequence[str] | str | None = None,
    request: EvaluationRequest | None = None,
    calibrator: Calibration | Calibrator | None = None,
    groups=None,
    kind: str = "auto",
    true_probs: np.ndarray | None = None,
    features: np.ndarray | None = None,
    bundle_path: str | None = None,
    progress=None,
) -> Report:
    """Evaluate scores against labels, after a calibrator when one is given.

    Parameters
    ----------
    scores : array_like (N, K), or Predictions
        Logits, probabilities or log-probabilities (``kind``; detected when "auto").
    labels : array_like, (N,)
        Integer labels in [0, K).
    metrics : list of str, optional
        Metric keys (``calib methods``); the default table when None. The one setting taken by
        name: every other one is the request's.
    request : EvaluationRequest, optional
        Every setting at once (:class:`calib.evaluation.request.EvaluationRequest`, what
        ``calib evaluate`` builds from its flags), most easily by name with
        :meth:`EvaluationRequest.of <calib.evaluation.request.EvaluationRequest.of>`:
        ``calib.EvaluationRequest.of(metrics=["cmce"], gates=["cmce>0.01"], bootstrap=200)``.
        Its settings: ``metrics``; ``bins``, ``cmce_bins`` (int or "auto": equal-width bins of the
        binned metrics and of CMCE, 15 and 25; "auto": ceil((2 n)^(1/3)) for n rows, the rows per
        label of a multi-label input, :func:`calib.metrics.definitions.auto_bins`); ``vece`` (add
        the V-ECE family to the default table) with ``vece_recalibrator`` ("ws-catboost"),
        ``vece_recipe``, ``vece_max_rows`` (20,000); ``gates``, ``increase_gates`` (threshold gates
        as text, ``"cmce>0.01"``, or Gate objects; change gates against a baseline,
        :func:`calib.evaluation.parse_change_gates`); ``bootstrap`` ("auto", int or
        BootstrapConfig), ``level`` (0.95), ``seed`` (0, also of V-ECE's folds),
        ``keep_as_baseline``: replicates that give each metric an interval and the gates their
        noise: pass, fail or inconclusive (docs/ci-gates.md); "auto" draws them when there are gates
        or ``keep_as_baseline`` (200 on inputs of up to 2,000 classes, a baseline's count and seed
        when it has replicates), as ``calib evaluate`` does, so both give one outcome; 0 none;
        ``ignore_noise`` (gates compare raw values), ``inconclusive`` ("pass" or "fail": what an
        inconclusive gate counts as), ``min_group_rows`` (100: smaller groups are not gated),
        ``emit_state`` (also write the additive metric state file there, for merging shards).
    calibrator : Calibration or Calibrator, optional
        Applied first; the report then also holds the model's own metrics.
    groups : array_like (N,), optional
        One group value per row (a source, a language): adds every group's streamed metrics
        (``Report.group_values``) and the worst group per metric.
    kind : str
        "auto", "logits", "probs" or "log-probs".
    true_probs : ndarray (N, K), optional
        The true conditional probabilities (synthetic data): adds nll_true, brier_true, CPSME.
    features : ndarray (N, d), optional
        Per-row features for a calibrator with an adaptive threshold.
    bundle_path : str, optional
        Where the calibrator came from, for the report.
    progress : callable, optional
        Called once per boosted fit of V-ECE.
    Returns
    -------
    Report
        ``values``, ``uncalibrated_values``, ``group_values``, ``passed``, the typed
        ``entries`` and ``to_dict()`` (the JSON report of ``calib evaluate``).

    >>> import numpy as np, calib
    >>> test = np.load(calib.sample_path("cifar10_test.npz"))
    >>> report = calib.evaluate(test["logits"], test["labels"], metrics=["accuracy", "ece"])
    >>> round(report.values["accuracy"], 4), round(report.values["ece"], 4)
    (0.9452, 0.0256)
    """
    from .evaluation import build_report
    from .evaluation.groups import Groups, groups_from_values, read_groups
    from .evaluation.request import EvaluationRequest

    if request is None:
        request = EvaluationRequest.of(metrics=metrics)
    elif metrics is not None:
        raise UsageError("give the metrics in the request or by name, not both")
    preds = as_predictions(scores, labels, kind=kind)
    if true_probs is not None:
        preds.true_probs = check_true_probs(true_probs, preds.n, preds.k, "true probabilities")
    if isinstance(calibrator, Calibration):
        calibrator.check_applies(preds)
    fitted = calibrator.fitted if isinstance(calibrator, Calibration) else calibrator
    if groups is not None and not isinstance(groups, Groups):
        groups = groups_from_values(groups, preds.n, "groups")
    elif groups is None and preds.groups_by is not None:  # an input that groups itself, as the command line groups it
        groups = read_groups(preds, preds.name, None, None)
    report = build_report(
        preds, request, calibrator=fitted, groups=groups, features=features, bundle_path=bundle_path, progress=progress
    )
    return Report(report)
