"""tools/type_ratchet.py: the type checker's errors may only go down, and the parts kept at none
stay at none (the checker's own run is CI's; here its counts are given)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "type_ratchet.py"


@pytest.fixture
def ratchet(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("type_ratchet", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RATCHET", tmp_path / "type_ratchet.json")
    monkeypatch.setattr(module, "ROOT", tmp_path)

    def run(found: dict, allowed: dict | None, *args: str) -> int:
        monkeypatch.setattr(module, "error_counts", lambda: Counter(found))
        if allowed is not None:
            module.RATCHET.write_text(json.dumps(allowed))
        return module.main(list(args))

    run.module = module
    return run


def test_the_same_count_passes_one_more_fails_and_one_fewer_asks_for_the_entry_lowered(ratchet, capsys):
    entry = {"src/calib/metrics/batch.py": 3}
    assert ratchet({"src/calib/metrics/batch.py": 3}, entry) == 0
    assert ratchet({"src/calib/metrics/batch.py": 4}, entry) == 1
    assert "4 type errors, at most 3 allowed" in capsys.readouterr().out
    assert ratchet({"src/calib/metrics/batch.py": 2}, entry) == 1
    assert "lower its entry" in capsys.readouterr().out
    assert ratchet({"src/calib/metrics/new_module.py": 1}, {}) == 1  # a file without an entry may have none


def test_an_update_only_lowers(ratchet):
    assert ratchet({"src/calib/metrics/batch.py": 2}, {"src/calib/metrics/batch.py": 3}, "--update") == 0
    assert json.loads(ratchet.module.RATCHET.read_text()) == {"src/calib/metrics/batch.py": 2}
    assert ratchet({"src/calib/metrics/batch.py": 5}, None, "--update") == 1
    assert json.loads(ratchet.module.RATCHET.read_text()) == {"src/calib/metrics/batch.py": 2}


@pytest.mark.parametrize(
    "path",
    [
        "src/calib/api.py",
        "src/calib/cli/render.py",
        "src/calib/drift/verdict.py",
        "src/calib/evaluation/gates.py",
        "src/calib/io/formats/base.py",
    ],
)
def test_one_error_in_a_part_kept_at_none_fails_whatever_the_entry_allows(ratchet, capsys, path):
    assert ratchet({path: 1}, {path: 5}) == 1
    assert ratchet({path: 1}, {path: 5}, "--update") == 1
    assert "kept at none" in capsys.readouterr().out


def test_the_parts_kept_at_none_have_no_entry_now():
    allowed = json.loads((TOOL.parent / "type_ratchet.json").read_text())
    spec = importlib.util.spec_from_file_location("type_ratchet", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [path for path in allowed if path.startswith(module.CLEAN)] == []
