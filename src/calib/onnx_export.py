"""A fitted calibrator as an ONNX graph: the model's scores in, calibrated probabilities (and the
conformal sets of a method that builds them) out, for serving without calib (docs/export.md).

The graph takes one (N, K) input named for the bundle's input kind (``logits``, ``log_probs`` or
``model_probs``) in float32 or float64, computes in float64 the formulas :meth:`transform` computes, and
gives ``probs`` (N, K) in the input's dtype, plus ``sets`` (N, K) bool for conformal methods.
Probability inputs are repaired as calib repairs them on reading (rows off the simplex by more than
1e-9 clipped to [0, 1] and renormalised) before log(max(p, 1e-12)) is taken. The model's metadata
records the method, its options, the bundle's sha256 and calib's version.

Each calibrator builds its own part of the graph (``onnx_outputs``), from the few operations of
:class:`OnnxGraph`; a method without a closed form raises :class:`~calib.errors.ExportError`
saying why. ``onnx`` is an optional extra, imported here on first use.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from .core import extras
from .core.numerics import PROB_FLOOR
from .errors import ExportError

#: The ONNX operator set the graphs use (every operator in it since opset 13; LessOrEqual since 16):
#: onnxruntime 1.11 (2022) and later run it.
OPSET = 17
#: The dtypes a graph's input and probability output may have.
DTYPES = ("float32", "float64")
#: Input names by the bundle's input kind.
INPUT_NAMES = {"logits": "logits", "log-probs": "log_probs", "probs": "model_probs"}


@dataclasses.dataclass(frozen=True)
class GraphInputs:
    """The float64 tensors a calibrator's graph starts from: ``logits`` (N, K), the log-space
    scores calib's transforms take, and ``probs``, the probabilities as given (probability inputs
    only, else None)."""

    logits: str
    probs: str | None


@dataclasses.dataclass(frozen=True)
class ClassTables:
    """One table per class in a graph constant (:meth:`OnnxGraph.per_class_table`): the flat
    constant's name, the padded row length and the (1, K) constant of each class's first entry."""

    flat: str
    width: int
    row_starts: str


class OnnxGraph:
    """Nodes and constants of one graph, named in order (``t0``, ``t1``, ...): ``op`` appends a node
    and returns its output's name; ``const`` stores an array (float64 unless its dtype says else)."""

    def __init__(self, n_classes: int):
        self.onnx = extras.require("onnx")
        self.n_classes = n_classes
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def _name(self) -> str:
        self._count += 1
        return f"t{self._count}"

    def const(self, value, dtype=np.float64) -> str:
        array = np.asarray(value, dtype=dtype)
        name = self._name()
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attributes):
        names = [self._name() for _ in range(outputs)]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), names, **attributes))
        return names[0] if outputs == 1 else names

    # row-wise helpers, on (N, K) tensors
    def softmax(self, x: str) -> str:
        return self.op("Softmax", x, axis=1)

    def log_softmax(self, x: str) -> str:
        return self.op("LogSoftmax", x, axis=1)

    def row_sum(self, x: str) -> str:
        """sum over each row, kept as an (N, 1) column."""
        return self.op("ReduceSum", x, self.const([1], np.int64), keepdims=1)

    def row_max(self, x: str) -> str:
        return self.op("ReduceMax", x, axes=[1], keepdims=1)

    def where(self, condition: str, if_true: str, if_false: str) -> str:
        return self.op("Where", condition, if_true, if_false)

    def as_float(self, mask: str) -> str:
        return self.op("Cast", mask, to=self.onnx.TensorProto.DOUBLE)

    def sigmoid(self, x: str) -> str:
        """1 / (1 + exp(-x)), as calib computes it (exp(-x) = inf gives 0)."""
        one = self.const(1.0)
        return self.op("Div", one, self.op("Add", one, self.op("Exp", self.op("Neg", x))))

    def model_probs(self, inputs: GraphInputs) -> str:
        """The model's probabilities: as given, else softmax(logits)."""
        return inputs.probs if inputs.probs is not None else self.softmax(inputs.logits)

    def column(self, x: str, k: int) -> str:
        """Column ``k`` of an (N, K) tensor, as (N, 1)."""
        return self.op("Slice", x, self.const([k], np.int64), self.const([k + 1], np.int64), self.const([1], np.int64))

    def per_class_table(self, tables: list[np.ndarray], pad: float) -> "ClassTables":
        """K 1-d tables of different lengths as one flat constant, each padded with ``pad`` to the
        same row length L (a power of two above the longest, so a binary search never reads past
        its row). Entry j of class k is at k L + j."""
        width = 1 << max(max(len(t) for t in tables), 1).bit_length()
        flat = np.full((len(tables), width), pad, dtype=np.float64)
        for k, table in enumerate(tables):
            flat[k, : len(table)] = table
        return ClassTables(self.const(flat.ravel()), width, self.const(np.arange(len(tables))[None, :] * width, np.int64))

    def lookup(self, tables: "ClassTables", index: str) -> str:
        """Entry ``index`` (N, K) int64 of each column's class table."""
        return self.op("Gather", tables.flat, self.op("Add", index, tables.row_starts))

    def count_at_most(self, x: str, edges: list[np.ndarray]) -> str:
        """#{j : edges_k[j] <= x_nk} per entry of the (N, K) ``x``, each class k with its own sorted
        edges: np.searchsorted(edges_k, x, side="right"), by a binary search over the padded
        tables (+inf pads are never at most x), log2 L steps of (N, K) tensors."""
        tables = self.per_class_table(edges, np.inf)
        count = self.op(
            "ConstantOfShape",
            self.op("Shape", x),
            value=self.onnx.helper.make_tensor("zero", self.onnx.TensorProto.INT64, [1], [0]),
        )
        step = tables.width // 2
        while step >= 1:
            candidate = self.op("Add", count, self.const(step, np.int64))
            edge = self.lookup(tables, self.op("Sub", candidate, self.const(1, np.int64)))
            count = self.where(self.op("LessOrEqual", edge, x), candidate, count)
            step //= 2
        return count


def _repaired_probs(g: OnnxGraph, probs: str, n_classes: int) -> str:
    """:func:`calib.core.validation.repair_probs` in the graph: rows with an entry outside [0, 1] or (K > 1)
    a sum off 1 by more than its tolerance are clipped to [0, 1] and divided by their sum."""
    from .core.validation import EXACT_SUM_TOLERANCE

    zero, one = g.const(0.0), g.const(1.0)
    off = g.op(
        "Or",
        g.op("Less", g.op("ReduceMin", probs, axes=[1], keepdims=1), zero),
        g.op("Greater", g.row_max(probs), one),
    )
    if n_classes > 1:
        sum_error = g.op("Abs", g.op("Sub", g.row_sum(probs), one))
        off = g.op("Or", off, g.op("Greater", sum_error, g.const(EXACT_SUM_TOLERANCE)))
    clipped = g.op("Clip", probs, zero, one)
    return g.where(off, g.op("Div", clipped, g.row_sum(clipped)), probs)


def _floored_log(g: OnnxGraph, probs: str) -> str:
    """log(max(p, PROB_FLOOR)): the log-space view calib takes of probabilities."""
    return g.op("Log", g.op("Max", probs, g.const(PROB_FLOOR)))


def _pair_inputs(g: OnnxGraph, column: str, input_kind: str) -> GraphInputs:
    """A multi-label input's pairs (M, 1) of P(y_l = 1) (its logit, log or value) as the two-class
    inputs calib reads them as: logits (0, z); log-probabilities (log(1 - e^l), l) with l = min(s, 0),
    1 - e^l as -l (1 + l/2 + l^2/6) for l > -1e-5 (ONNX has no expm1; relative error < 1e-11), an exact
    0 floored at log 1e-12; probabilities clipped to [0, 1], (1 - p, p) as given and their floored logs."""
    if input_kind == "logits":
        zero = g.op(
            "ConstantOfShape",
            g.op("Shape", column),
            value=g.onnx.helper.make_tensor("zero", g.onnx.TensorProto.DOUBLE, [1], [0.0]),
        )
        return GraphInputs(g.op("Concat", zero, column, axis=1), None)
    one = g.const(1.0)
    if input_kind == "log-probs":
        log_p1 = g.op("Min", column, g.const(0.0))
        series = g.op(
            "Neg",
            g.op(
                "Mul", log_p1, g.op("Add", one, g.op("Mul", log_p1, g.op("Add", g.const(0.5), g.op("Div", log_p1, g.const(6.0)))))
            ),
        )
        p0 = g.where(g.op("Greater", log_p1, g.const(-1e-5)), series, g.op("Sub", one, g.op("Exp", log_p1)))
        log_p0 = g.where(g.op("Greater", p0, g.const(0.0)), g.op("Log", p0), g.const(float(np.log(PROB_FLOOR))))
        return GraphInputs(g.op("Concat", log_p0, log_p1, axis=1), None)
    p1 = g.op("Clip", column, g.const(0.0), one)
    probs = g.op("Concat", g.op("Sub", one, p1), p1, axis=1)
    return GraphInputs(_floored_log(g, probs), probs)


def _set_codes(g: OnnxGraph, sets: str) -> str:
    """Each pair's set over {0, 1} (M, 2) as its code: 0 {0}, 1 {1}, 2 {0, 1}, -1 {} (int8)."""
    int8 = g.onnx.TensorProto.INT8
    has_0 = g.op("Squeeze", g.column(sets, 0), g.const([1], np.int64))
    has_1 = g.op("Squeeze", g.column(sets, 1), g.const([1], np.int64))
    code = g.op("Add", g.op("Cast", has_1, to=int8), g.op("Cast", g.op("And", has_0, has_1), to=int8))
    return g.where(g.op("Not", g.op("Or", has_0, has_1)), g.const(-1, np.int8), code)


def _label_pair_outputs(calibrator, g: OnnxGraph, given: str, input_kind: str, n_labels: int) -> dict:
    """(N, L) outputs of a calibrator of a multi-label input's pairs: P(y_l = 1) and, for a
    conformal method, each label's set code. A shared calibrator maps the N L pairs in one (N L, 2)
    tensor; a calibrator per label maps its label's column with its own graph."""
    per_label = getattr(calibrator, "calibrators_", None)  # a calibrator per label (calib.calibrators.per_label)
    if per_label is None:
        flat = g.op("Reshape", given, g.const([-1, 1], np.int64))
        built = calibrator.onnx_outputs(g, _pair_inputs(g, flat, input_kind))
        shape = g.const([-1, n_labels], np.int64)
        out = {"probs": g.op("Reshape", g.column(built["probs"], 1), shape)}
        if "sets" in built:
            out["sets"] = g.op("Reshape", _set_codes(g, built["sets"]), shape)
        return out
    parts = [c.onnx_outputs(g, _pair_inputs(g, g.column(given, label), input_kind)) for label, c in enumerate(per_label)]
    out = {"probs": g.op("Concat", *[g.column(part["probs"], 1) for part in parts], axis=1)}
    if "sets" in parts[0]:
        codes = [g.op("Unsqueeze", _set_codes(g, part["sets"]), g.const([1], np.int64)) for part in parts]
        out["sets"] = g.op("Concat", *codes, axis=1)
    return out


def onnx_model(
    calibrator, *, n_classes: int, input_kind: str, metadata: dict, dtype: str = "float32", n_labels: int | None = None
) -> bytes:
    """The serialised ONNX model of a fitted ``calibrator`` for (N, ``n_classes``) inputs of
    ``input_kind``, or for a calibrator of a multi-label input's pairs (N, ``n_labels``) inputs of
    P(y_l = 1) in (N, L) probabilities and set codes out; ``metadata`` (JSON-able values) goes
    into the model's metadata. Raises :class:`ExportError` for a method or fit without a closed form."""
    if dtype not in DTYPES:
        raise ExportError(f"the graph's dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if input_kind not in INPUT_NAMES:
        raise ExportError(f"input kind {input_kind!r} has no ONNX input; expected one of {', '.join(INPUT_NAMES)}")
    g = OnnxGraph(n_classes)
    onnx = g.onnx
    tensor_type = onnx.TensorProto.FLOAT if dtype == "float32" else onnx.TensorProto.DOUBLE
    input_name = INPUT_NAMES[input_kind]
    given = g.op("Cast", input_name, to=onnx.TensorProto.DOUBLE)
    width, set_type = n_classes, onnx.TensorProto.BOOL
    if n_labels is not None:
        built = _label_pair_outputs(calibrator, g, given, input_kind, n_labels)
        width, set_type = n_labels, onnx.TensorProto.INT8
    else:
        if input_kind == "probs":
            probs = _repaired_probs(g, given, n_classes)
            inputs = GraphInputs(_floored_log(g, probs), probs)
        elif input_kind == "log-probs":
            inputs = GraphInputs(g.log_softmax(given), None)
        else:
            inputs = GraphInputs(given, None)
        built = calibrator.onnx_outputs(g, inputs)
    g.nodes.append(onnx.helper.make_node("Cast", [built["probs"]], ["probs"], to=tensor_type))
    outputs = [onnx.helper.make_tensor_value_info("probs", tensor_type, ["N", width])]
    if "sets" in built:
        g.nodes.append(onnx.helper.make_node("Identity", [built["sets"]], ["sets"]))
        outputs.append(onnx.helper.make_tensor_value_info("sets", set_type, ["N", width]))
    graph = onnx.helper.make_graph(
        g.nodes,
        f"calib_{calibrator.name.replace('-', '_')}",
        [onnx.helper.make_tensor_value_info(input_name, tensor_type, ["N", width])],
        outputs,
        initializer=g.initializers,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], producer_name="calib", ir_version=8
    )
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = f"calib.{key}", value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    model.doc_string = f"calib {calibrator.name} calibrator: {input_name} (N, {width}) {dtype} -> probs" + (
        (" and sets (bool)" if n_labels is None else " and sets (int8 codes)") if "sets" in built else ""
    )
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()
