"""The `calib` process ends without the interpreter's teardown (calib.cli.process_exit): the exit
status, standard output, the exit handlers and other threads' work are those of a normal exit."""

import os
import subprocess
import sys

import numpy as np
import pytest

from calib.cli.process_exit import FLUSH_FAILED, exit_code

#: a program that buffers ~1 MB on standard output, registers an exit handler, then ends the way
#: `calib` does with the status given as its argument ("none", a number, or a message)
ENDING = (
    "import atexit, sys\n"
    "from calib.cli.process_exit import exit_without_teardown\n"
    "atexit.register(lambda: sys.stderr.write('handler ran\\n'))\n"
    "sys.stdout.write('x' * 1_000_000 + 'end\\n')\n"
    "code = sys.argv[1]\n"
    "exit_without_teardown(None if code == 'none' else int(code) if code.isdigit() else code)\n"
    "sys.stderr.write('not reached\\n')\n"
)
#: the environment with standard output buffered (as it is unless PYTHONUNBUFFERED is set), so that
#: what a program writes is flushed at its exit
BUFFERED = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (1, 1), (2, 2), (130, 130), ("a message", 1)])
def test_the_status_of_a_system_exit_is_pythons(code, status, capsys):
    assert exit_code(code) == status
    assert capsys.readouterr().err == ("a message\n" if isinstance(code, str) else "")


@pytest.mark.parametrize("code, status", [("none", 0), ("0", 0), ("1", 1), ("2", 2), ("gate failed", 1)])
def test_the_output_is_complete_and_the_exit_handlers_run(code, status):
    done = subprocess.run([sys.executable, "-c", ENDING, code], capture_output=True, text=True, env=BUFFERED)
    assert done.returncode == status
    assert done.stdout == "x" * 1_000_000 + "end\n"
    assert done.stderr == ("gate failed\n" if code == "gate failed" else "") + "handler ran\n"


def test_another_live_thread_is_waited_for_as_in_a_normal_exit(tmp_path):
    """A thread still working when the command returns (here: writing a file once the main thread
    has finished, which only a normal exit lets it see) finishes: the process takes the normal exit,
    which joins it."""
    code = (
        "import sys, threading\n"
        "from calib.cli.process_exit import exit_without_teardown\n"
        "def work():\n    threading.main_thread().join()\n    open(sys.argv[1], 'w').write('done')\n"
        "threading.Thread(target=work).start()\n"
        "exit_without_teardown(3)\n"
    )
    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, "-c", code, str(marker)], capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert marker.read_text() == "done"


def test_a_full_disk_under_standard_output_is_one_line_and_pythons_status():
    if sys.platform != "linux":
        pytest.skip("/dev/full is Linux's")
    code = ENDING.replace("1_000_000", "100")  # held in the buffer until the exit's flush
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", code, "0"], stdout=full, stderr=subprocess.PIPE, text=True, env=BUFFERED)
    assert done.returncode == FLUSH_FAILED == 120
    lines = done.stderr.splitlines()
    assert lines[0] == "handler ran" and lines[1].startswith("calib: error: standard output could not be written: ")
    assert len(lines) == 2


def test_a_reader_that_left_gives_exit_1_and_no_traceback():
    """The reader closes the pipe before the program's last flush: exit 1, as a closed pipe during
    a command gives, and nothing on standard error."""
    code = (
        "import sys\n"
        "from calib.cli.process_exit import exit_without_teardown\n"
        "sys.stdout.write('x' * 100)\n"
        "sys.stdin.readline()\n"  # the reader has closed its end when this returns
        "exit_without_teardown(0)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=BUFFERED
    )
    process.stdout.close()
    _, err = process.communicate(b"go\n")
    assert process.returncode == 1 and err == b""


def test_the_command_line_statuses_through_the_console_program(tmp_path):
    """`python -m calib` (as the `calib` script) keeps main()'s statuses: 0 done, 1 a gate failed,
    2 bad input, each with the output of an in-process run."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "p.npz", logits=rng.normal(size=(200, 3)) * 3, labels=rng.integers(0, 3, 200))
    command = [sys.executable, "-m", "calib", "evaluate", str(tmp_path / "p.npz"), "--no-vece", "--metrics", "ece,nll"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and "ece" in done.stdout and "nll" in done.stdout, done.stderr
    done = subprocess.run([*command, "--fail-if", "nll>0.01", "--ignore-noise"], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    done = subprocess.run([*command[:4], str(tmp_path / "missing.npz")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "missing.npz" in done.stderr
