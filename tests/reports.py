"""Typed evaluation reports for the unit tests of gates and renderers, built from the sections a
JSON report of ``calib evaluate`` holds (calib.evaluation.report_types)."""

from calib.evaluation.report_types import EvaluationReport


def report(metrics=None, *, bootstrap=None, groups=None, min_rows=0, source="g", input=None, gates=None, passed=True):
    """A report of ``metrics`` ({key: entry}), with a ``bootstrap`` section, ``groups`` ({name:
    {"n", "metrics"}}, gated from ``min_rows`` rows, their values from ``source``), an ``input``
    section and ``gates`` (entries) when given."""
    document = {"input": input or {}, "metrics": metrics or {}}
    if bootstrap is not None:
        document["bootstrap"] = bootstrap
    if groups is not None:
        document.update(groups=groups, group_by={"min_rows": min_rows, "source": source})
    if gates is not None:
        document.update(gates=gates, passed=passed)
    return EvaluationReport.from_json(document)


def values(**metrics):
    """A report of metric values only: ``values(cmce=0.375)``."""
    return report({key: {"value": value} for key, value in metrics.items()})


def assert_same_report(found: dict, expected: dict, path: str = "") -> None:
    """The same JSON but the input section (where the rows came from), numbers to 1e-12 (sums
    added in another order)."""
    if isinstance(expected, dict):
        keys = set(expected) - ({"input"} if path == "" else set())
        assert set(found) - ({"input"} if path == "" else set()) == keys, path
        for key in keys:
            assert_same_report(found[key], expected[key], f"{path}/{key}")
    elif isinstance(expected, list):
        assert isinstance(found, list) and len(found) == len(expected), path
        for i, (a, b) in enumerate(zip(found, expected)):
            assert_same_report(a, b, f"{path}[{i}]")
    elif isinstance(expected, float) and isinstance(found, float):
        assert abs(found - expected) <= 1e-12, (path, found, expected)
    else:
        assert found == expected, (path, found, expected)
