"""Mutation testing of calib's core: which small, realistic bugs would the tests miss?

    python -m benchmarks.mutation --jobs 2 --budget-minutes 120 --out results/
    python -m benchmarks.mutation --modules calib/evaluation/gates.py   # one module

The mutants are Cosmic Ray's (``pip install -e ".[mutation]"``): its operators, restricted to the ones
that make plausible bugs (:data:`OPERATORS`: numbers +-1, boundary comparisons < <= > >=, == !=,
+ -, * /, and/or, True/False, an added ``not``, a dropped minus sign), over :data:`MODULES`, the
core modules named in docs/testing.md. Cosmic Ray's own runner runs one test command for every
mutant (hours here); this script runs, for each mutant, only the tests that execute its line:

1. a coverage run of the default test suite (a context per test, named by its node id) maps every
   line of the core modules to the tests that run it (a line run only at import, such as a
   constant, to every test that runs any of its module's code);
2. each mutant is applied by Cosmic Ray in a scratch copy of the repository (one per job, so jobs
   run side by side) and those tests run with ``pytest -x``, the fastest first, at most
   ``--max-tests`` of them (40: a line of softmax is run by most of the suite); a mutant whose line
   no test runs counts as a survivor ("not covered");
3. survivors listed in docs/testing.md as equivalent (a change no test can see, with the reason)
   are kept apart; the kill rate is killed / (all mutants - equivalent ones).

Every run uses the NumPy kernels (``CALIB_KERNELS=numpy``): the compiled kernels are tested against
them bit for bit elsewhere (tests/unit/core/test_kernels.py), and mutating Python cannot reach C. Lines marked
``# pragma: no mutate`` are skipped. A test run over 120 s (a mutant that loops) counts as killed.
Writes results/mutation.{json,md} and prints the survivors with their diffs. Not a test: the
"mutation" workflow runs it by hand or on a schedule (.github/workflows/mutation.yml).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The core: numerics, the kernels' NumPy path, the metrics, the calibrators' conformal and scaling
#: code, validation, bundles, gates and metric states.
MODULES = (
    "calib/core/numerics.py",
    "calib/core/kernels.py",
    "calib/metrics/accumulators.py",
    "calib/core/binning.py",
    "calib/metrics/definitions.py",
    "calib/metrics/batch.py",
    "calib/metrics/metric_set.py",
    "calib/metrics/smooth.py",
    "calib/calibrators/conformal.py",
    "calib/calibrators/conformal_mass.py",
    "calib/calibrators/set_based.py",
    "calib/calibrators/temperature.py",
    "calib/calibrators/matrix_scaling.py",
    "calib/core/validation.py",
    "calib/bundle.py",
    "calib/evaluation/gates.py",
    "calib/evaluation/states.py",
)
#: Cosmic Ray operators that make plausible bugs (its full set adds bit operators, `is`, powers
#: and so on: 7,500 mutants of the same modules, most of them killed by any test).
OPERATORS = frozenset(
    {
        "core/NumberReplacer",
        "core/ReplaceComparisonOperator_Lt_LtE",
        "core/ReplaceComparisonOperator_LtE_Lt",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "core/ReplaceComparisonOperator_GtE_Gt",
        "core/ReplaceComparisonOperator_Eq_NotEq",
        "core/ReplaceComparisonOperator_NotEq_Eq",
        "core/ReplaceBinaryOperator_Add_Sub",
        "core/ReplaceBinaryOperator_Sub_Add",
        "core/ReplaceBinaryOperator_Mul_Div",
        "core/ReplaceBinaryOperator_Div_Mul",
        "core/AddNot",
        "core/ReplaceAndWithOr",
        "core/ReplaceOrWithAnd",
        "core/ReplaceTrueWithFalse",
        "core/ReplaceFalseWithTrue",
        "core/ReplaceUnaryOperator_USub_UAdd",
    }
)
#: Bugs planted by hand in calib's core that the tests once missed (each as the text it replaces
#: and its replacement), with the test files that must now catch them (``--planted``).
PLANTED = (
    (
        "calib/core/numerics.py",
        'side="right") - 1, 0, n_bins - 1)',
        'side="left") - 1, 0, n_bins - 1)',
        "quantile-ECE edges: right -> left",
    ),
    (
        "calib/metrics/accumulators.py",
        "(mass <= self.hi + EDGE_TOLERANCE)",
        "(mass < self.hi + EDGE_TOLERANCE)",
        "coverage band's upper edge: <= -> <",
    ),
    ("calib/calibrators/temperature.py", "BETA_RTOL = 1e-12", "BETA_RTOL = 1e-4", "temperature stopping tolerance 1e-12 -> 1e-4"),
    (
        "calib/calibrators/conformal.py",
        "return scores <= threshold + edge_slack",
        "return scores < threshold + edge_slack",
        "set rule V <= q -> V < q",
    ),
    (
        "calib/calibrators/venn_abers.py",
        "p1 / (1.0 - p0 + p1)",
        "p1 / (1.0 + p0 - p1)",
        "Venn-Abers merge p1 / (1 - p0 + p1) -> p1 / (1 + p0 - p1)",
    ),
    (
        "calib/bundle.py",
        "    if hashlib.sha256(data).hexdigest() != digest:",
        '    if name == "params.json" and hashlib.sha256(data).hexdigest() != digest:',
        "bundle: only params.json verified",
    ),
    (
        "calib/evaluation/gates.py",
        'result = outcome(entry["worsening"], spread, ">", limit)',
        'result = outcome(entry["worsening"], spread, ">=", limit)',
        "increase gate: <= allowed -> < allowed",
    ),
    (
        "calib/evaluation/gates.py",
        "    if value is None:\n        return FAIL",
        "    if value is None:\n        return PASS",
        "an undefined value passes a threshold gate",
    ),
    ("calib/core/validation.py", "EXACT_SUM_TOLERANCE = 1e-9", "EXACT_SUM_TOLERANCE = 1e-6", "exactness tolerance 1e-9 -> 1e-6"),
)
PLANTED_TESTS = (
    "tests/guarantees/test_boundaries.py",
    "tests/guarantees/test_dependable.py",
    "tests/unit/metrics/test_metrics.py",
    "tests/unit/test_bundle.py",
    "tests/end_to_end/test_cli.py",
)
TEST_TIMEOUT = 120.0
ENV = {"CALIB_KERNELS": "numpy", "PYTHONDONTWRITEBYTECODE": "1", "CALIB_THREADS": "1"}


def scratch_copy(destination: Path) -> Path:
    """The repository's tracked files (and untracked ones git does not ignore) copied to ``destination``,
    with the compiled kernels where they are built."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for built in (ROOT / "src" / "calib").glob("_kernels*.so"):  # the compiled path's tests run too
        shutil.copy2(built, destination / "src" / "calib" / built.name)
    return destination


def environment(copy: Path) -> dict:
    return {**os.environ, **ENV, "PYTHONPATH": str(copy / "src") + os.pathsep + str(copy)}


#: A pytest plugin that names coverage's context after each test's node id (coverage's own
#: test_function contexts take hypothesis's internals for the test of every property test).
CONTEXT_PLUGIN = """
import coverage
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)
    yield
    if current is not None:
        current.switch_context("")
"""


def coverage_map(copy: Path, modules: list[str], log, tests: list[str]) -> dict[tuple[str, int], list[str]]:
    """(module, line) -> the tests (pytest node ids) of ``tests`` (the default suite when empty)
    that run it; a line run only when its module is imported (a constant, a default argument, a
    decorator) -> every test that runs any of that module's code or names what the line defines;
    both in the order of :func:`ranked_tests`."""
    from coverage import CoverageData

    rc = copy / ".coveragerc"
    rc.write_text("[run]\nsource = calib\n")
    (copy / "calib_mutation_contexts.py").write_text(CONTEXT_PLUGIN)
    started = time.perf_counter()
    command = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    junit = copy / "junit.xml"
    subprocess.run(
        [*command, "-p", "calib_mutation_contexts", "-x", f"--junitxml={junit}", *tests],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        check=True,
    )
    log(f"coverage run of the tests: {time.perf_counter() - started:.0f} s")
    seconds = test_durations(junit)
    data = CoverageData(basename=str(copy / ".coverage"))
    data.read()
    sources = test_sources(copy)
    out: dict[tuple[str, int], list[str]] = {}
    for measured in data.measured_files():
        module = next((m for m in modules if measured.endswith(m)), None)
        if module is None:
            continue
        by_line = data.contexts_by_lineno(measured)

        by_line = {line: {context for context in contexts if context} for line, contexts in by_line.items()}
        text = (copy / "src" / module).read_text()
        lines, functions = text.splitlines(), enclosing_functions(text)
        for line, tests in by_line.items():
            names = line_names(lines, line) | ({functions[line]} if line in functions else set())
            if not tests:  # run only at import: every test that runs the module's code or names the line's names
                tests = {test for test, source in sources.items() if any(name in source for name in names)}
                tests |= {test for runs in by_line.values() for test in runs}
            out[(module, line)] = ranked_tests(tests, line, by_line, seconds, names, sources)
        for line, first in statement_starts(text).items():  # coverage counts a statement at its first line
            if (module, line) not in out and (module, first) in out:
                out[(module, line)] = out[(module, first)]
    return out


#: Lines either side of a mutated line whose tests count in :func:`ranked_tests`.
NEAR_LINES = 15


#: The suite's edge tests (hand arithmetic at each edge, documented defaults, both kernel paths
#: against independent formulations): tried first on every mutant they run.
EDGE_TEST_FILES = re.compile(
    r"tests/(?:\w+/)*test_(boundaries|documented_defaults|kernels|gates|\w+_details|calibrators|definitions|validation)\.py::"
)


def ranked_tests(tests, line: int, by_line: dict[int, set], seconds: dict[str, float], names: set, sources: dict) -> list[str]:
    """``tests`` in the order a mutant on ``line`` runs them (at most ``--max-tests`` of them):
    the edge tests first (:data:`EDGE_TEST_FILES`), then within each group the tests whose own
    source names the line's function or a name on the line (the rarer the name in the suite, the
    earlier), then those that run the rarely run lines near it (within :data:`NEAR_LINES`; a line
    run by m tests adds 1/m to each), then the fastest. An edge or a refusal is tested by the few
    tests that reach its branch or call its function by name: a bound check (``labels >= K``)
    sits next to the raise only bad labels reach, so its tests come before the hundreds of fast
    tests that merely pass through."""
    nearby = dict.fromkeys(tests, 0.0)
    for near in range(line - NEAR_LINES, line + NEAR_LINES + 1):
        runs = by_line.get(near)
        if runs:
            for test in runs & nearby.keys():
                nearby[test] += 1.0 / len(runs)
    naming = {name: {t for t, source in sources.items() if re.search(rf"\b{re.escape(name)}\b", source)} for name in names}

    def named(test: str) -> float:
        test = test.split("[")[0]
        return max((1.0 / len(holders) for holders in naming.values() if test in holders), default=0.0)

    return sorted(
        tests,
        key=lambda test: (not EDGE_TEST_FILES.match(test), -named(test), -round(nearby[test], 9), seconds.get(test, 60.0), test),
    )


def line_names(lines: list[str], line: int) -> set[str]:
    """The names on ``line`` of a module (a decorator's: the class or function it decorates too),
    less :data:`COMMON_NAMES` and names of fewer than 4 letters."""
    text = lines[line - 1]
    if text.lstrip().startswith("@"):
        following = next((t for t in lines[line:] if t.lstrip().startswith(("class ", "def "))), "")
        text += " " + following
    return {name for name in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text) if len(name) >= 4} - COMMON_NAMES


def statement_starts(text: str) -> dict[int, int]:
    """line -> the first line of the innermost statement that spans it, for a module's source."""
    import ast

    statements = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.stmt)]
    out: dict[int, int] = {}
    for node in sorted(statements, key=lambda node: -((node.end_lineno or node.lineno) - node.lineno)):
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            out[line] = node.lineno
    return out


def enclosing_functions(text: str) -> dict[int, str]:
    """line -> the name of the innermost function around it, for a module's source."""
    import ast

    out: dict[int, str] = {}

    def visit(node, name):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            if inner is not None and hasattr(child, "lineno"):
                for number in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    out[number] = inner
            visit(child, inner)

    visit(ast.parse(text), None)
    return out


#: Names too common to tell which tests a line concerns.
COMMON_NAMES = frozenset(
    {"self", "float", "bool", "return", "None", "True", "False", "import", "from", "range", "class", "lambda", "dataclass"}
)


def test_sources(copy: Path) -> dict[str, str]:
    """pytest node id (without parameters) -> the source of that test function, for every test file."""
    import ast

    out = {}
    for path in sorted((copy / "tests").rglob("test_*.py")):
        text = path.read_text()
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                out[f"{path.relative_to(copy).as_posix()}::{node.name}"] = ast.get_source_segment(text, node) or ""
    return out


def test_durations(junit: Path) -> dict[str, float]:
    """Seconds of each test (pytest node id) in pytest's JUnit XML report, whose class names are
    module paths with dots (tests.unit.metrics.test_metrics) and whose names carry the parameters."""
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1) + 1
        node = "/".join(parts[:module]) + ".py::" + "".join(f"{part}::" for part in parts[module:]) + case.get("name", "")
        out[node] = float(case.get("time", 0.0))
    return out


def mutants(copy: Path, modules: list[str]) -> list:
    """Cosmic Ray's work items for :data:`OPERATORS` on ``modules`` of ``copy``, lines marked
    ``# pragma: no mutate`` left out."""
    from cosmic_ray.commands.init import _all_work_items

    items = []
    for module in modules:
        path = copy / "src" / module
        lines = path.read_text().splitlines()
        for item in _all_work_items([path], {}):
            mutation = item.mutations[0]
            line = lines[mutation.start_pos[0] - 1]
            if mutation.operator_name in OPERATORS and "pragma: no mutate" not in line and not _keyword_marker(line, mutation):
                items.append(item)
    return items


def _keyword_marker(line: str, mutation) -> bool:
    """The bare ``*`` of a signature (keyword-only arguments after it), which Cosmic Ray takes for a
    multiplication: its "mutant" ``/`` makes the arguments before it positional-only, a change no
    caller that passes them by position can see."""
    column = mutation.start_pos[1]
    return line[column : column + 1] == "*" and line[column + 1 : column + 2] in (",", ")")


def equivalent_mutants() -> list[dict]:
    """The survivors docs/testing.md explains as equivalent: its table rows
    ``| module | line text | operator | why |`` under "Equivalent mutants"."""
    path = ROOT / "docs" / "testing.md"
    text = path.read_text() if path.exists() else ""
    section = text.split("## Equivalent mutants", 1)[1] if "## Equivalent mutants" in text else ""
    rows = []
    for line in section.splitlines():
        inner = line.strip().removeprefix("|").removesuffix("|")
        cells = [cell.strip().strip("`").replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]
        if len(cells) == 4 and cells[0].startswith("calib/"):
            rows.append({"module": cells[0], "line": cells[1], "operator": cells[2], "why": cells[3]})
    return rows


def is_equivalent(result: dict, known: list[dict]) -> bool:
    return any(
        row["module"] == result["module"]
        and row["line"] == result["source"]
        and re.fullmatch(row["operator"].replace("*", ".*"), result["operator"])
        for row in known
    )


def run_mutant(item, copy: Path, module: str, tests: list[str]) -> dict:
    """Apply the mutant (Cosmic Ray's mutation of the module's file in ``copy``, put back after),
    run ``tests`` on it: exit 0 is "survived", 5 (no test collected) "error", which counts as
    neither; any other exit (a test failed, the module or conftest failed to import) or a time-out
    is "killed"."""
    import attrs
    from cosmic_ray.mutating import use_mutation
    from cosmic_ray.plugins import get_operator

    mutation = item.mutations[0]
    mutation = attrs.evolve(mutation, module_path=copy / "src" / module)
    line = mutation.start_pos[0]
    source = (copy / "src" / module).read_text().splitlines()[line - 1].strip()
    result = {
        "module": module,
        "line": line,
        "operator": mutation.operator_name,
        "occurrence": mutation.occurrence,
        "source": source,
    }
    if not tests:
        return {**result, "outcome": "not covered", "tests": 0}
    operator = get_operator(mutation.operator_name)()
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    with use_mutation(mutation.module_path, operator, mutation.occurrence) as (original, mutated):
        if mutated is None:
            return {**result, "outcome": "error", "tests": len(tests), "output": "no mutation at this occurrence"}
        try:
            done = subprocess.run(command, cwd=copy, env=environment(copy), capture_output=True, text=True, timeout=TEST_TIMEOUT)
            code, output = done.returncode, done.stdout[-2000:]
        except subprocess.TimeoutExpired:
            code, output = 1, "time-out"
    # 0: every test passed; 5: no test collected (a wrong node id); any other exit is a failure the
    # mutant caused (1 a test failed; 2, 3, 4 its module or the tests' conftest failed to import),
    # since the same tests pass unmutated (check_unmutated)
    outcome = {0: "survived", 5: "error"}.get(code, "killed")
    diff = "".join(difflib.unified_diff(original.splitlines(True), mutated.splitlines(True), f"a/{module}", f"b/{module}", n=1))
    return {
        **result,
        "outcome": outcome,
        "tests": len(tests),
        "diff": diff,
        **({"output": output} if outcome != "killed" else {}),
    }


def check_unmutated(copies: list[Path], covering: dict, log, samples: int = 6) -> None:
    """The test sets of a few random lines pass on every unmutated copy: a broken environment
    would otherwise make every mutant look killed."""
    chosen = random.Random(0).sample(sorted(covering), min(samples, len(covering)))
    for copy in copies:
        for key in chosen:
            command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *covering[key]]
            done = subprocess.run(command, cwd=copy, env=environment(copy), capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the tests of {key} fail without a mutation in {copy}:\n{done.stdout[-2000:]}")
    log(f"the tests of {len(chosen)} random lines pass unmutated on every copy")


def planted(log) -> list[dict]:
    """Each bug of :data:`PLANTED` applied alone in a scratch copy, :data:`PLANTED_TESTS` run on it."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="calib-planted-") as folder:
        copy = scratch_copy(Path(folder) / "copy")
        for module, old, new, what in PLANTED:
            path = copy / "src" / module
            original = path.read_text()
            if original.count(old) < 1:
                raise SystemExit(f"planted bug not found in {module}: {old!r}")
            path.write_text(original.replace(old, new, 1))
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *PLANTED_TESTS],
                    cwd=copy,
                    env=environment(copy),
                    capture_output=True,
                    text=True,
                )
            finally:
                path.write_text(original)
            failed = [line.split(" ")[1] for line in done.stdout.splitlines() if line.startswith("FAILED")]
            rows.append({"bug": what, "where": module, "caught": done.returncode != 0, "by": failed[0] if failed else ""})
            log(f"{'caught' if done.returncode else 'MISSED'}: {what} ({module}) {failed[0] if failed else ''}")
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested side by side, each in its own copy")
    parser.add_argument("--budget-minutes", type=float, default=240.0, help="stop starting mutants after this long")
    parser.add_argument("--modules", default=",".join(MODULES), help="comma-separated modules under src/")
    parser.add_argument("--tests", default="", help="comma-separated test files for the coverage map (default: the whole suite)")
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--max-tests", type=int, default=40, help="run at most this many of a line's tests, the fastest first")
    parser.add_argument("--planted", action="store_true", help="only check that the tests catch the planted bugs")
    parser.add_argument(
        "--retest",
        type=Path,
        help="a mutation.json of an earlier run: test again only its survivors and errors (after new tests)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="report the results of these mutation.json files together (a later file's modules replace an earlier one's)",
    )
    args = parser.parse_args(argv)
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    log = lambda line: print(line, flush=True)  # noqa: E731
    if args.merge:
        results = merged_results(args.merge)
        report(results, len(results), args.out, 0.0, log)
        return
    if args.planted:
        rows = planted(log)
        raise SystemExit(0 if all(row["caught"] for row in rows) else 1)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="calib-mutation-") as folder:
        copies = [scratch_copy(Path(folder) / f"copy{j}") for j in range(args.jobs)]
        covering = coverage_map(copies[0], modules, log, [t for t in args.tests.split(",") if t])
        items = mutants(copies[0], modules)
        earlier = []
        if args.retest is not None:
            previous = [{**r, "outcome": r.get("was", r["outcome"])} for r in json.loads(args.retest.read_text())["results"]]
            wanted = {
                (r["module"], r["operator"], r["occurrence"])
                for r in previous
                if r["outcome"] in ("survived", "not covered", "error") and r["module"] in modules
            }
            earlier = [r for r in previous if (r["module"], r["operator"], r["occurrence"]) not in wanted]
            items = [item for item in items if _key(item, copies[0]) in wanted]
        log(f"{len(items)} mutants in {len(modules)} modules")
        check_unmutated(copies, covering, log)
        work: queue.Queue = queue.Queue()
        for item in items:
            work.put(item)
        results: list[dict] = []
        lock = threading.Lock()
        deadline = started + 60.0 * args.budget_minutes

        def worker(copy: Path) -> None:
            while time.perf_counter() < deadline:
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                mutation = item.mutations[0]
                module = Path(mutation.module_path).relative_to(copies[0] / "src").as_posix()
                tests = covering.get((module, mutation.start_pos[0]), [])[: args.max_tests]
                result = run_mutant(item, copy, module, tests)
                with lock:
                    results.append(result)
                    if len(results) % 50 == 0:
                        log(f"{len(results)} of {len(items)} done, {time.perf_counter() - started:.0f} s")

        from cosmic_ray.plugins import get_operator

        for name in OPERATORS:  # load the operator plugins once, before the threads use them
            get_operator(name)
        # one thread per copy, one mutant at a time in each; the tests run in subprocesses
        threads = [threading.Thread(target=worker, args=(copy,)) for copy in copies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    results = earlier + results
    report(results, len(results), args.out, time.perf_counter() - started, log)


def merged_results(paths: list[Path]) -> list[dict]:
    """The results of several runs' mutation.json, each module's from the last file that has it
    (a retest's file carries its run's other modules too), with their outcomes before the
    equivalents were applied, so that the current table of equivalent mutants decides."""
    by_module: dict[str, list[dict]] = {}
    for path in paths:
        results = json.loads(path.read_text())["results"]
        for module in {r["module"] for r in results}:
            by_module[module] = [{**r, "outcome": r.get("was", r["outcome"])} for r in results if r["module"] == module]
    return [r for module in sorted(by_module) for r in by_module[module]]


def _key(item, copy: Path) -> tuple:
    mutation = item.mutations[0]
    return (Path(mutation.module_path).relative_to(copy / "src").as_posix(), mutation.operator_name, mutation.occurrence)


def report(results: list[dict], total: int, out: Path, seconds: float, log) -> None:
    known = equivalent_mutants()
    for result in results:
        if result["outcome"] in ("survived", "not covered") and is_equivalent(result, known):
            result["outcome"], result["was"] = "equivalent", result["outcome"]
    counts = Counter(result["outcome"] for result in results)
    judged = len(results) - counts["equivalent"] - counts["error"]
    killed = counts["killed"]
    rate = killed / judged if judged else float("nan")
    by_module = []
    for module in sorted({r["module"] for r in results}):
        mine = Counter(r["outcome"] for r in results if r["module"] == module)
        by_module.append(
            {
                "module": module,
                "mutants": sum(mine.values()),
                "killed": mine["killed"],
                "survived": mine["survived"],
                "not covered": mine["not covered"],
                "equivalent": mine["equivalent"],
                "error": mine["error"],
            }
        )
    survivors = [r for r in results if r["outcome"] in ("survived", "not covered")]
    out.mkdir(parents=True, exist_ok=True)
    summary = {"mutants": total, "run": len(results), "seconds": round(seconds), "outcomes": dict(counts), "kill rate": rate}
    (out / "mutation.json").write_text(json.dumps({"summary": summary, "modules": by_module, "results": results}, indent=1))
    lines = [
        f"{len(results)} of {total} mutants run in {seconds / 60:.0f} min; killed {killed} of {judged} "
        f"non-equivalent ({100 * rate:.1f}%); {counts['equivalent']} equivalent, {len(survivors)} survivors",
        "",
        "| module | mutants | killed | survived | not covered | equivalent | error |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m['module']} | {m['mutants']} | {m['killed']} | {m['survived']} | {m['not covered']} | {m['equivalent']} | {m['error']} |"
        for m in by_module
    ]
    lines += ["", "## Survivors", ""]
    for r in sorted(survivors, key=lambda r: (r["module"], r["line"])):
        lines.append(f"- {r['module']}:{r['line']} {r['operator']} ({r['outcome']}): `{r['source']}`")
    (out / "mutation.md").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))
    errors = [r for r in results if r["outcome"] == "error"]
    if errors:
        lines += ["", f"## Errors ({len(errors)}: the tests could not run; neither killed nor survived)", ""]
        lines += [f"- {r['module']}:{r['line']} {r['operator']}: {r.get('output', '')[-300:]!r}" for r in errors[:20]]
        (out / "mutation.md").write_text("\n".join(lines) + "\n")
    for r in survivors:
        if r.get("diff"):
            log(r["diff"])


if __name__ == "__main__":
    main()
