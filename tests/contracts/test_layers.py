"""The package's layers (docs/architecture.md): every import, at module level or inside a function,
points down or sideways within its layer, and the modules have no import cycle."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

#: Layers, bottom first: a module may import its own layer's modules and those below.
LAYERS = [
    [
        "calib._version",
        "calib._kernels",
        "calib.errors",
        "calib.core",
        "calib.onnx_export",
    ],
    ["calib.io"],
    ["calib.bundle"],
    ["calib.calibrators"],
    ["calib.registry", "calib.estimators"],
    ["calib.metrics"],
    ["calib.bootstrap", "calib.pipeline", "calib.drift.priors"],
    ["calib.evaluation", "calib.table_partitions", "calib.shards", "calib.task_engines", "calib.spark", "calib.ray"],
    ["calib.reporting", "calib.synth", "calib.estimation"],
    ["calib.diagnose"],
    ["calib.api", "calib.drift", "calib.sklearn", "calib"],
    ["calib.operations"],
    ["calib.cli", "calib.__main__"],
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every calib module ``path`` imports, lazily or not (``from . import x`` counts as module ``x``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "calib"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "calib":
                continue
            modules = {f"{target}.{alias.name}" for alias in node.names}
            submodules = {m for m in modules if _is_module(m)}
            found |= submodules or {target}
    return found - {name}


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package (a .py file, a compiled extension, a folder)."""
    path = SRC / name.replace(".", "/")
    return path.is_dir() or any(path.parent.glob(path.name + ".*"))


def layer_of(module: str) -> int:
    best = None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or (prefix != "calib" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer of tests/contracts/test_layers.py"
    return best[0]


GRAPH = {module_name(p): imports(p) for p in (SRC / "calib").rglob("*.py")}


def test_no_import_points_up_a_layer():
    upward = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if layer_of(b) > layer_of(a))
    assert upward == []


def test_no_import_cycle():
    """Between modules (a package's __init__ re-exporting its modules is not a cycle of them)."""
    edges = {
        a: {b for b in targets if b in GRAPH and not (GRAPH.get(b) and a.startswith(b + "."))} for a, targets in GRAPH.items()
    }
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_no_function_is_longer_than_80_lines():
    """Counted from the first statement of the body: a command's typer option declarations (its
    signature) and a docstring's parameter list aside."""
    long = []
    for path in (SRC / "calib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
                lines = node.end_lineno - body[0].lineno + 1
                if lines > 80:
                    long.append(f"{module_name(path)}.{node.name}: {lines} lines")
    assert long == []


#: What the command line may import: the library's operations and the renderers (and its own modules).
#: calib._version: the version line, which ``calib --version`` prints before the program loads (calib.cli.launch)
CLI_MAY_IMPORT = ("calib.operations", "calib.reporting", "calib._version")


def test_the_command_line_reaches_the_library_only_through_its_operations():
    """calib.cli maps flags, calls calib.operations and renders: every policy and default stays in
    the library, so a notebook and a CI job get the same answer."""
    reached = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.startswith("calib.cli")
        for target in targets
        if not target.startswith("calib.cli")
        and not any(target == allowed or target.startswith(allowed + ".") for allowed in CLI_MAY_IMPORT)
    )
    assert reached == []


def library_names_of_the_command_line() -> set[str]:
    """The names the command line takes from the library (calib.operations and calib._version;
    the renderers of calib.reporting aside): imported by name, or read as ``operations.NAME``."""
    names = set()
    for path in (SRC / "calib" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("operations", "_version") and node.level == 2:
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "operations":
                names.add(node.attr)
    return names


def test_the_command_line_calls_a_few_operations():
    """Fewer than 20 library names, each one of the operations' public names (or the version
    line): the command line calls operations (read an input, evaluate, compare, diagnose, fit,
    write an output, export, synthesize), not internals re-exported for it."""
    import calib.operations

    names = library_names_of_the_command_line()
    assert names - set(calib.operations.__all__) <= {"version_line"}
    assert len(names) < 20, sorted(names)


def test_docs_architecture_lists_every_operation_the_command_line_names():
    """docs/architecture.md's "The command line's operations" names each of them."""
    text = (SRC.parent / "docs" / "architecture.md").read_text()
    section = text[text.index("## The command line's operations") : text.index("## One `calib evaluate`")]
    import re

    assert sorted(name for name in library_names_of_the_command_line() if not re.search(rf"\b{name}\b", section)) == []


def _is_flag_declaration(node: ast.FunctionDef) -> bool:
    """A command whose parameters are its flags (typer options and arguments, or the shared ones
    of calib.cli.options): their count is the command line's, not an API's."""
    annotations = [ast.unparse(arg.annotation) for arg in node.args.args if arg.annotation is not None]
    return any("typer.Option" in text or "typer.Argument" in text or text.startswith("options.") for text in annotations)


#: The flat constructors of a settings value: their parameters are that value's settings by name,
#: each typed and listed (no ``**settings``), and they return the one value the callers pass on.
FLAT_CONSTRUCTORS = {
    "calib.evaluation.request.EvaluationRequest.of",
    # the flat form of calib.io.readers.Reading: Reading(**options).read(path), its fields one to one
    "calib.io.readers.read_predictions",
}


def test_no_public_function_takes_more_than_12_parameters():
    """Settings that travel together are one value (calib.evaluation.request.EvaluationRequest,
    a calibrator's Options), not a long parameter list; the command functions, whose parameters
    are their flags, and the flat constructors of such a value aside."""
    long = []
    for path in (SRC / "calib").rglob("*.py"):
        tree = ast.parse(path.read_text())
        owners = {id(item): f"{cls.name}." for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for item in cls.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
                continue
            if f"{module_name(path)}.{owners.get(id(node), '')}{node.name}" in FLAT_CONSTRUCTORS:
                continue
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
            if len(names) > 12 and not _is_flag_declaration(node):
                long.append(f"{module_name(path)}.{node.name}: {len(names)} parameters")
    assert long == []


#: Public functions that take ``**name``, each for a reason that is not a bag of settings: a
#: method's own options (each method has its own set, checked by name against its Options at once),
#: scikit-learn's ``set_params`` protocol, an ONNX node's attributes, a decorator's pass-through,
#: and the calibrator protocol's ``given`` (the probabilities as read, ``probs=``, passed only to
#: the methods that score them, whose own signatures name it).
KEYWORD_BAGS = {
    "calib.api.calibrator": "options",
    "calib.api.Calibration.__init__": "options",
    "calib.sklearn.CalibratedClassifier.__init__": "options",
    "calib.api.Calibration.set_params": "params",
    "calib.sklearn.CalibratedClassifier.set_params": "params",
    "calib.onnx_export.OnnxGraph.op": "attributes",
    "calib.calibrators.base.guarded": "kwargs",
    "calib.calibrators.base.Calibrator.transform_with_info": "given",
    "calib.calibrators.base.SetBuilder.sets": "given",
    "calib.calibrators.base.SetBuilder.transform_and_sets": "given",
}


def test_no_public_function_hides_its_settings_in_keyword_arguments():
    """Settings are named parameters (or one settings value), never ``**settings``: readers, IDEs
    and type checkers see every one."""
    found = {}
    for path in (SRC / "calib").rglob("*.py"):
        tree = ast.parse(path.read_text())
        owners = {id(item): f"{cls.name}." for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for item in cls.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.kwarg is not None:
                name = f"{module_name(path)}.{owners.get(id(node), '')}{node.name}"
                if not node.name.startswith("_") or node.name == "__init__":
                    found[name] = node.args.kwarg.arg
    assert found == KEYWORD_BAGS


#: The modules whose code names a multi-label input (``preds.multilabel``, the input section's
#: ``multilabel``, the pairs read from an (N, L) label matrix): the layout of the pairs and their
#: reading (calib.io), the report's input section, and the synthetic generator's public names
#: (``calib synth multilabel``, ``calib.synth.multilabel_data``). Every other module reaches pairs
#: through the layouts' own methods (``Predictions.output_layout``: ``n_labels``, ``pairs_per_row``,
#: ``task()``, ``to_json()``, shape, blocks, labels, pair labels) or the calibrators' (per label,
#: joint coverage), and branches on those facts, not on the word.
MULTILABEL_MODULES = {
    "calib.cli.synth",
    "calib.evaluation.report_types",
    "calib.io.predictions",
    "calib.io.readers",
    "calib.synth",
    "calib.synth.multilabel",
}


def _names(tree: ast.AST):
    """Every identifier a module's code uses or defines (strings, comments and docstrings aside)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.alias):
            yield node.asname or node.name
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            yield node.arg


def test_multi_label_code_stays_in_its_modules():
    """A new ``if preds.multilabel`` branch goes where pairs already live, or behind a layout's or
    a calibrator's method: the list only shrinks."""
    reading = {
        module_name(path)
        for path in (SRC / "calib").rglob("*.py")
        if any("multilabel" in name.lower() for name in _names(ast.parse(path.read_text())))
    }
    assert len(MULTILABEL_MODULES) <= 6
    assert reading - MULTILABEL_MODULES == set()
    assert MULTILABEL_MODULES - reading == set(), "a module no longer reads it: drop it from the list"


TESTS = SRC.parent / "tests"
#: The kinds of tests: unit tests mirroring the package, contracts over the registries, the docs
#: and the layers, the commands end to end, and the guarantees that span modules (edges,
#: near-certain and hostile inputs, reproducers of real-world trials).
TEST_KINDS = ("unit", "contracts", "end_to_end", "guarantees")


def test_the_unit_tests_mirror_the_package():
    """tests/unit/<folders>/test_<name>.py tests the module src/calib/<folders>/<name>.py, the
    package <folders>/<name>, or (<name> the last folder's) the package <folders> as a whole; every
    test file sits in one of the kinds."""
    misplaced = [
        str(path.relative_to(TESTS)) for path in TESTS.rglob("test_*.py") if path.relative_to(TESTS).parts[0] not in TEST_KINDS
    ]
    assert misplaced == []
    unmatched = []
    for path in (TESTS / "unit").rglob("test_*.py"):
        folders = path.relative_to(TESTS / "unit").parts[:-1]
        name = path.stem.removeprefix("test_")
        package = SRC / "calib" / Path(*folders)
        if not ((package / f"{name}.py").is_file() or (package / name).is_dir() or (folders and folders[-1] == name)):
            unmatched.append(str(path.relative_to(TESTS)))
    assert unmatched == []


def test_no_test_file_imports_another():
    """Shared helpers live in tests/conftest.py, tests/reference.py, tests/reports.py and
    tests/golden.py: a test file importing another works only in some collection orders."""
    found = []
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(TESTS)} imports {name}" for name in names if name.split(".")[0].startswith("test_")]
    assert found == []


def test_the_comparison_runs_on_the_engine():
    """calib.drift has no gate parser or gate check, no bootstrap draw or loop over replicates, and
    no ECE of its own: gates are calib.evaluation.gates', replicates calib.bootstrap's (row weights
    and their intervals), metrics the registry's."""
    import re

    found = []
    for path in (SRC / "calib" / "drift").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and re.search(r"(parse|check).*gate|gate.*(parse|check)", node.name):
                found.append(f"{path.name}: defines {node.name}")
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in (
                    "split_condition",
                    "outcome",
                    "Spread",
                    "integers",
                    "multinomial",
                    "poisson",
                    "bin_index",
                    "BinCounter",
                ):
                    found.append(f"{path.name}: calls {name}")
            if isinstance(node, ast.For) and re.search(r"range\(.*(bootstrap|replicate)", ast.unparse(node.iter)):
                found.append(f"{path.name}: loops over {ast.unparse(node.iter)}")
    assert found == []
