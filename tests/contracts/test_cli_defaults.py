"""Every flag's default is the library's: a notebook and a CI job get the same answer. Each flag of a
command that names a setting of the library call behind it (a dataclass field or a keyword) must
default to that setting's default; the differences by design are listed with their reasons.

`calib compare` reads its defaults from the library (`calib.cli.options.library_default`);
evaluate, merge-states and diagnose write theirs out, because reading them would import the metric
stack on every command's start (tests/end_to_end/test_cli.py keeps it out): this test is what keeps
those literals equal to the library's."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import typer.main

import calib
from calib.cli.app import app
from calib.diagnose import diagnose

#: The request calib.diagnose takes by default (its settings are the diagnosis's defaults).
DIAGNOSIS_REQUEST = inspect.signature(diagnose).parameters["request"].default
#: The library settings behind each command, searched in order: a flag takes the first one with its
#: name (a dataclass's fields, a dataclass instance's values, a function's keywords).
OWNERS = {
    "evaluate": (calib.EvaluationRequest.of, calib.EvaluationRequest),
    "merge-states": (calib.EvaluationRequest,),
    "diagnose": (diagnose, DIAGNOSIS_REQUEST),
    "compare": (calib.ComparisonRequest,),
    "fit": (calib.fit_calibrator,),
}
#: Flags spelled otherwise than their setting: (command, flag) -> the setting's name (dotted: a field of a field).
SPELLED = {
    ("evaluate", "confidence"): "level",
    ("compare", "bootstrap"): "replicates",
    ("diagnose", "bootstrap"): "bootstrap.replicates",
}
#: Values spelled otherwise on the command line: (command, flag) -> {the flag's default: the library's}.
VALUES = {
    ("evaluate", "bootstrap"): {None: "auto"},  # an unset --bootstrap is "auto"
    ("evaluate", "max_increase"): {None: ()},  # no --max-increase: no change gates
    ("evaluate", "max_decrease"): {None: ()},
    ("diagnose", "compare"): {None: ()},  # no --compare: no methods
    ("compare", "top_k"): {None: ()},  # no --top-k: none
}
#: Flags whose default differs from the library's by design.
BY_DESIGN = {
    # a table of the command line has V-ECE unless --no-vece; the library's default request has none
    # (seconds of boosted fits that a notebook asks for by name): docs/cli.md, docs/api.md
    ("evaluate", "no_vece"),
    ("diagnose", "no_vece"),
}


def setting(owner, name: str):
    """(True, the default of setting ``name`` of ``owner``), or (False, None) where it has none."""
    head, _, rest = name.partition(".")
    if dataclasses.is_dataclass(owner) and not isinstance(owner, type):
        if not hasattr(owner, head):
            return False, None
        value = getattr(owner, head)
        return setting(value, rest) if rest else (True, value)
    if dataclasses.is_dataclass(owner):
        fields = {field.name: field for field in dataclasses.fields(owner)}
        if head not in fields or rest:
            return False, None
        field = fields[head]
        if field.default is not dataclasses.MISSING:
            return True, field.default
        return (True, field.default_factory()) if field.default_factory is not dataclasses.MISSING else (False, None)
    parameter = inspect.signature(owner).parameters.get(head)
    if parameter is None or parameter.default is inspect.Parameter.empty or rest:
        return False, None
    return True, parameter.default


def checked_flags():
    """(command, flag, its default, the library's default) for every flag with a library setting."""
    commands = typer.main.get_command(app).commands
    for command, owners in OWNERS.items():
        for param in commands[command].params:
            name = SPELLED.get((command, param.name), param.name)
            for owner in owners:
                found, default = setting(owner, name)
                if found:
                    yield command, param.name, VALUES.get((command, param.name), {}).get(param.default, param.default), default
                    break


def test_every_flag_defaults_to_the_librarys_setting():
    checked = list(checked_flags())
    assert len(checked) >= 20  # the flags found: bins, seeds, levels, V-ECE's settings, group rows...
    for command, flag, default, library in checked:
        if (command, flag) in BY_DESIGN:
            continue
        expected = str(library) if isinstance(default, str) and not isinstance(library, str) else library
        assert default == expected, f"calib {command} --{flag.replace('_', '-')}: {default!r}, the library's {library!r}"


@pytest.mark.parametrize(
    "command, flag",
    [("evaluate", "bins"), ("evaluate", "vece_max_rows"), ("evaluate", "confidence"), ("evaluate", "min_group_rows"),
     ("merge-states", "min_group_rows"), ("diagnose", "folds"), ("diagnose", "rank_by"), ("compare", "bootstrap"),
     ("compare", "level"), ("diagnose", "bootstrap"), ("evaluate", "bootstrap")],
)  # fmt: skip
def test_the_flags_once_written_as_literals_are_checked(command, flag):
    """The flags whose defaults were once literals in the command line are among the checked ones."""
    assert (command, flag) in {(found[0], found[1]) for found in checked_flags()}


def test_each_method_option_with_named_choices_is_a_flag_of_fit():
    """fit's option flags (FLAG_OPTIONS, which `calib methods` shows as flags) are the methods'
    options with named choices and the miscoverage level, each a parameter of the command."""
    from calib.cli.fit import FLAG_OPTIONS
    from calib.registry import OPTION_CHOICES

    fit_flags = {param.name for param in typer.main.get_command(app).commands["fit"].params}
    assert set(FLAG_OPTIONS) == {"alpha", *OPTION_CHOICES} and set(FLAG_OPTIONS) <= fit_flags


def test_each_synthetic_dataset_flag_is_its_kinds_setting():
    """calib synth reads its defaults from the library (calib.synth.files.DEFAULTS): every flag of a
    dataset's command that names one of its kind's settings defaults to it."""
    from calib.synth.files import DEFAULTS

    synth = typer.main.get_command(app).commands["synth"]
    checked = 0
    for kind, settings in DEFAULTS.items():
        for param in synth.commands[kind].params:
            if param.name in settings:
                assert param.default == settings[param.name], (kind, param.name)
                checked += 1
    assert checked == sum(len(settings) for settings in DEFAULTS.values())
