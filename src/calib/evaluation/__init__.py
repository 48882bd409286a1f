"""Evaluation: the report of ``calib evaluate`` (metrics streamed over chunks of rows, whole-sample
metrics, CI gates) and the metric state files that shards merge. One module per job:
:mod:`.streaming` (the streaming pass), :mod:`.sample` (V-ECE and KDE-ECE), :mod:`.gates` (with
:mod:`.gate_noise`, how they read the noise, and :mod:`.gate_parsing`, their text and baselines),
:mod:`.states`, :mod:`.report_types` (the report as data), :mod:`.report` (all of them together)."""

from ..metrics import check_metric_keys
from ..metrics.metric_set import MetricSet
from ..metrics.sample import SampleConfig
from .gate_parsing import parse_change_gates, parse_gate, read_report
from .gates import ChangeGate, Gate, check_gates
from .report import apply_gates, build_report
from .report_types import EvaluationReport, GateResult, GroupSection, InputSection, MetricEntry
from .sample import sample_results
from .states import merge_metric_states, read_metric_state, state_header, write_metric_state
from .streaming import SetStats, StreamedMetrics, compute_metrics, stream_metrics, uncalibrated_batch

__all__ = [
    "ChangeGate",
    "EvaluationReport",
    "GateResult",
    "GroupSection",
    "InputSection",
    "MetricEntry",
    "StreamedMetrics",
    "apply_gates",
    "stream_metrics",
    "Gate",
    "MetricSet",
    "SetStats",
    "SampleConfig",
    "check_gates",
    "check_metric_keys",
    "compute_metrics",
    "build_report",
    "merge_metric_states",
    "parse_change_gates",
    "parse_gate",
    "read_metric_state",
    "read_report",
    "state_header",
    "uncalibrated_batch",
    "sample_results",
    "write_metric_state",
]
