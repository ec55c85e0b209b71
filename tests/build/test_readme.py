"""The README's supported-matrix section is the one the current spec set generates."""
import pathlib

from flyaot.build_tools import matrix

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_matrix_is_current():
    text = README.read_text()
    block = text[text.index(matrix.BEGIN):text.index(matrix.END) + len(matrix.END)]
    assert block == matrix.render(), "run `python -m flyaot.build_tools matrix --update README.md`"


def test_readme_names_the_two_commands():
    text = README.read_text()
    assert "make wheel" in text and "make test" in text
    assert "make test" in (README.parent / ".ci" / "run").read_text()
