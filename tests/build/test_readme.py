"""The README's generated sections are current, and its fresh-machine commands are the ones CI runs."""
import pathlib
import subprocess
import sys

from flyaot.build_tools import matrix
from tools import readme_commands

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def test_readme_matrix_is_current():
    text = README.read_text()
    block = text[text.index(matrix.BEGIN):text.index(matrix.END) + len(matrix.END)]
    assert block == matrix.render(), "run `python -m flyaot.build_tools matrix --update README.md`"


def test_readme_has_exactly_two_fresh_machine_commands_and_ci_runs_them():
    cmds = readme_commands.commands(README.read_text())
    assert len(cmds) == 2
    # each is a Makefile target that exists
    for cmd in cmds:
        target = cmd.split("#")[0].split()[1]
        dry = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
    ci = (REPO / ".ci" / "run").read_text()
    assert "tools/readme_commands.py" in ci and "python3 -m venv" in ci
    out = subprocess.run([sys.executable, str(REPO / "tools" / "readme_commands.py"), str(README)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == cmds


def test_markers_are_required():
    import pytest
    with pytest.raises(ValueError):
        readme_commands.commands("no markers here\n")
