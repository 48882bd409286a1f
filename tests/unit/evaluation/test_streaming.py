"""calib.evaluation.streaming: what the streaming pass hands to the report."""

import json

import numpy as np


def test_a_replicate_without_a_value_is_null_in_the_json_report(run, tmp_path):
    """A group of one row among 60: a replicate that draws none of its cluster leaves the group's
    metrics undefined there (about 37% of replicates, (1 - 1/200)^200). The report holds null, as
    it does for an undefined value, never NaN, which strict JSON readers refuse."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "s.npz", logits=rng.normal(size=(60, 3)), labels=rng.integers(0, 3, 60))
    np.save(tmp_path / "g.npy", np.array([0] * 59 + [1]))
    args = ["--metrics", "mce", "--no-vece", "--groups", tmp_path / "g.npy", "--min-group-rows", "1", "--bootstrap", "50"]
    code, out, err = run("evaluate", tmp_path / "s.npz", *args, "--json", "-")
    assert code == 0, err

    def refuse(constant):
        raise ValueError(f"{constant} in the JSON report")

    report = json.loads(out, parse_constant=refuse)
    replicates = report["bootstrap"]["by_group"]["1"]["mce"]
    assert None in replicates and any(value is not None for value in replicates)
