"""Bundles: round trip, verification on load, refusal to overwrite, byte-identical refits."""

import json
import os

import numpy as np
import pytest

from calib import CALIBRATORS, BundleError, State, read_bundle, write_bundle
from calib.pipeline import load_calibrator


@pytest.fixture
def bundle(tmp_path, run):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", logits=rng.normal(size=(200, 5)).astype(np.float32), labels=rng.integers(0, 5, 200))
    code, _, err = run("fit", tmp_path / "cal.npz", "--method", "ts", "--out", tmp_path / "b")
    assert code == 0, err
    return tmp_path / "b"


def _rewrite_manifest(path, change):
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_manifest_has_the_contract_fields(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    for key in (
        "format",
        "format_version",
        "calib_version",
        "method",
        "options",
        "n_classes",
        "input_kind",
        "fitted_on",
        "files",
        "fit_report",
    ):
        assert key in manifest
    assert manifest["format"] == "calib-bundle" and manifest["format_version"] == 1
    assert manifest["n_classes"] == 5 and manifest["input_kind"] == "logits" and manifest["fitted_on"]["n"] == 200
    calibrator, _ = load_calibrator(str(bundle))
    assert calibrator.temperature_ == manifest["fit_report"]["temperature"]


def test_tampered_file_is_refused(bundle):
    params = json.loads((bundle / "params.json").read_text())
    params["temperature"] = 1.0
    (bundle / "params.json").write_text(json.dumps(params))
    with pytest.raises(BundleError, match="sha256"):
        read_bundle(str(bundle), CALIBRATORS)


@pytest.mark.parametrize("name", ["../outside.json", "/etc/passwd", "sub/x.npy", ".hidden"])
def test_names_leaving_the_directory_are_refused(bundle, name):
    _rewrite_manifest(bundle, lambda m: m["files"].update({name: "0" * 64}))
    with pytest.raises(BundleError, match="not a plain file"):
        read_bundle(str(bundle), CALIBRATORS)


def test_symlink_out_of_the_bundle_is_refused(bundle, tmp_path):
    (tmp_path / "secret.npy").write_bytes(b"x")
    os.symlink(tmp_path / "secret.npy", bundle / "link.npy")
    import hashlib

    _rewrite_manifest(bundle, lambda m: m["files"].update({"link.npy": hashlib.sha256(b"x").hexdigest()}))
    with pytest.raises(BundleError, match="outside"):
        read_bundle(str(bundle), CALIBRATORS)


def test_unknown_method_and_newer_version_are_refused(bundle):
    _rewrite_manifest(bundle, lambda m: m.update(method="magic"))
    with pytest.raises(BundleError, match="unknown method 'magic'"):
        read_bundle(str(bundle), CALIBRATORS)
    _rewrite_manifest(bundle, lambda m: m.update(method="ts", format_version=2))
    with pytest.raises(BundleError, match="newer"):
        read_bundle(str(bundle), CALIBRATORS)


def test_pickled_array_is_refused(tmp_path):
    write_bundle(
        str(tmp_path / "b"),
        manifest={"method": "ts", "options": {}, "n_classes": 2, "input_kind": "logits"},
        state=State(params={"temperature": 1.0}, arrays={"w": np.zeros(2)}),
    )
    payload = tmp_path / "b" / "w.npy"
    np.save(payload, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    import hashlib

    _rewrite_manifest(tmp_path / "b", lambda m: m["files"].update({"w.npy": hashlib.sha256(payload.read_bytes()).hexdigest()}))
    with pytest.raises(BundleError, match="not a plain numeric"):
        read_bundle(str(tmp_path / "b"), CALIBRATORS)


def test_missing_file_and_bad_json(bundle):
    os.remove(bundle / "params.json")
    with pytest.raises(BundleError, match="missing"):
        read_bundle(str(bundle), CALIBRATORS)
    (bundle / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match="not valid JSON"):
        read_bundle(str(bundle), CALIBRATORS)


def test_refuses_to_overwrite_without_force_and_refits_byte_identically(bundle, run, tmp_path):
    before = {name: (bundle / name).read_bytes() for name in os.listdir(bundle)}
    code, _, err = run("fit", tmp_path / "cal.npz", "--method", "ts", "--out", bundle)
    assert code == 2 and "--force" in err
    code, _, err = run("fit", tmp_path / "cal.npz", "--method", "ts", "--out", bundle, "--force")
    assert code == 0, err
    after = {name: (bundle / name).read_bytes() for name in os.listdir(bundle)}
    assert before == after
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert leftovers == []


def test_empty_existing_directory_is_fine(tmp_path, run, bundle):
    (tmp_path / "empty").mkdir()
    code, _, err = run("fit", tmp_path / "cal.npz", "--method", "ts", "--out", tmp_path / "empty")
    assert code == 0, err
    assert (tmp_path / "empty" / "manifest.json").exists()
