"""The command line's operations: what each ``calib`` command does, as library calls that take
their settings by name and return what the command renders (docs/architecture.md, "The command
line's operations"). The command line reaches the library only through this package (and the
renderers of calib.reporting), so a CI job, a script and a notebook that call these get the
command's answer.

- read an input: :class:`Source` (where the rows come from, how they are read), :func:`read_source`
  is what each operation below starts with;
- evaluate: :func:`plan_evaluation` (metrics of rows with labels, estimates of rows without, a
  directory of shards), :func:`merge_states`;
- compare: :func:`plan_comparison`; diagnose: :func:`plan_diagnosis`;
- fit: :func:`fit_source`; write an output: :func:`apply_source`; export: :func:`export_bundle`;
- synthesize: :func:`synthesize` a :class:`Synthesis`;
- their settings: :class:`Reading`, :class:`EvaluationRequest`, :class:`ComparisonRequest`, and
  :func:`choices_text`, the choices of a setting as help text lists them.

A plan reads and checks everything before the work (its ``fits`` or ``steps`` size a progress
display); its ``run`` does the work.
"""

from ..core.allocator import keep_freed_memory
from ..drift.request import ComparisonRequest
from ..errors import CalibError, UsageError
from ..io.readers import Reading
from ..synth.files import Synthesis, synthesize
from .applying import apply_source
from .choices import choices_text
from .comparing import plan_comparison
from .diagnosing import plan_diagnosis
from .evaluating import merge_states, plan_evaluation
from .exporting import export_bundle
from .fitting import fit_source
from .inputs import Source
from .outputs import write_output

#: Loaded on first use: the evaluation request loads the metric registry, which a command that
#: evaluates nothing (fit, apply, export, synth) does not need at its start.
_LOADED_ON_USE = {"EvaluationRequest": "..evaluation.request"}


def __getattr__(name: str):
    if name in _LOADED_ON_USE:
        import importlib

        value = getattr(importlib.import_module(_LOADED_ON_USE[name], __name__), name)
        globals()[name] = value  # kept: later lookups skip this hook
        return value
    raise AttributeError(f"module 'calib.operations' has no attribute {name!r}")


__all__ = [
    "CalibError",
    "ComparisonRequest",
    "EvaluationRequest",
    "Reading",
    "Source",
    "Synthesis",
    "UsageError",
    "apply_source",
    "choices_text",
    "export_bundle",
    "fit_source",
    "keep_freed_memory",
    "merge_states",
    "plan_comparison",
    "plan_diagnosis",
    "plan_evaluation",
    "synthesize",
    "write_output",
]
