"""The choices of a setting as help text lists them (calib.operations.choices)."""

from calib.operations import choices_text


def test_each_setting_lists_its_choices_from_where_they_are_defined():
    from calib.estimators.recalibrators import DEFAULT_RECIPE, RECALIBRATORS
    from calib.io.writers import WRITERS
    from calib.registry import OPTION_CHOICES

    assert choices_text("formats").endswith(" or .parquet") or " or " in choices_text("formats")
    assert ".npz" in choices_text("formats") and ".npz" in choices_text("outputs")
    assert all(suffix in choices_text("outputs") for suffix in WRITERS)
    assert ".npz" not in choices_text("shard formats") and ".parquet" in choices_text("shard formats")
    assert choices_text("recalibrators") == " | ".join(RECALIBRATORS)
    assert f"{DEFAULT_RECIPE} (" in choices_text("recipes")
    assert choices_text("score") == " | ".join(OPTION_CHOICES["score"])
