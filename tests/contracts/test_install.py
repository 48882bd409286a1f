"""The light core: what each command imports, and what a missing extra says."""

import subprocess
import sys
import textwrap

import pytest
from conftest import SAMPLE

HEAVY = ("torch", "catboost", "matplotlib", "numba", "dask")


def _run_python(code: str, *args: str):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)


def _imported_after(argv: list[str], blocked: tuple[str, ...] = ()) -> tuple[int, list[str], str]:
    """Run the CLI in a fresh interpreter (``blocked`` modules made unimportable); returns the exit
    code, the heavy modules it imported, and its stderr."""
    code = """
        import importlib.abc, json, sys
        blocked = tuple(json.loads(sys.argv[1]))

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in blocked:
                    raise ModuleNotFoundError(f"No module named {name!r}")

        sys.meta_path.insert(0, Block())
        sys.argv = ["calib", *json.loads(sys.argv[2])]
        from calib.cli.app import main
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code or 0
        heavy = sorted(m for m in %r if m in sys.modules)
        print(json.dumps([code, heavy]), file=sys.__stdout__)
    """ % (HEAVY,)
    import json

    done = _run_python(code, json.dumps(list(blocked)), json.dumps(argv))
    code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return code, heavy, done.stderr


def test_import_calib_loads_no_heavy_dependency():
    done = _run_python(f"import sys, calib; calib.InputError; print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert done.stdout.strip() == "[]", done.stderr


def test_evaluate_without_vece_imports_no_heavy_dependency(tmp_path):
    code, heavy, err = _imported_after(
        ["evaluate", str(SAMPLE / "cifar10_test.npz"), "--no-vece", "--json", str(tmp_path / "r.json")]
    )
    assert code == 0, err
    assert heavy == []


def test_fit_and_apply_of_ts_need_no_heavy_dependency(tmp_path):
    code, heavy, err = _imported_after(
        ["fit", str(SAMPLE / "cifar10_val.npz"), "--method", "ts", "--out", str(tmp_path / "b")], blocked=HEAVY
    )
    assert code == 0, err
    code, heavy, err = _imported_after(
        ["apply", str(tmp_path / "b"), str(SAMPLE / "cifar10_test.npz"), "--out", str(tmp_path / "p.npy")], blocked=HEAVY
    )
    assert code == 0 and heavy == [], err


@pytest.mark.parametrize("method", ["adaptive-ts", "ats-aq", "ats-maq"])
def test_a_method_whose_extra_is_missing_says_which_to_install(tmp_path, method):
    code, _, err = _imported_after(
        ["fit", str(SAMPLE / "cifar10_val.npz"), "--method", method, "--out", str(tmp_path / "b")], blocked=("torch",)
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calib: error: "), err
    assert "pip install 'calib-cli[torch]'" in lines[0] and "download.pytorch.org/whl/cpu" in lines[0]
    assert not (tmp_path / "b").exists()


def test_dask_engine_without_dask_says_which_extra(tmp_path):
    (tmp_path / "shards").mkdir()
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = np.load(SAMPLE / "cifar10_test.npz")
    table = pa.table({"logits": list(data["logits"][:100]), "label": data["labels"][:100]})
    pq.write_table(table, tmp_path / "shards" / "a.parquet")
    code, _, err = _imported_after(["evaluate", str(tmp_path / "shards"), "--engine", "dask", "--no-vece"], blocked=("dask",))
    assert code == 2 and "pip install 'calib-cli[dask]'" in err


def test_version_names_the_kernel_path(run):
    from calib.core.kernels import BACKEND

    code, out, _ = run("--version")
    assert code == 0 and out.strip().endswith(f"(kernels: {BACKEND})")
    assert BACKEND in ("compiled", "numpy")


def test_fitting_leaves_torch_global_random_state_alone():
    torch = pytest.importorskip("torch")
    import numpy as np

    from calib import calibrator

    data = np.load(SAMPLE / "cifar10_val.npz")
    torch.manual_seed(1234)
    before = torch.random.get_rng_state().clone()
    calibrator("adaptive-ts").fit(data["logits"][:600], data["labels"][:600])
    assert torch.equal(torch.random.get_rng_state(), before)
    state = np.random.get_state()[1].copy()
    calibrator("ts").fit(data["logits"][:600], data["labels"][:600])
    assert np.array_equal(np.random.get_state()[1], state)
