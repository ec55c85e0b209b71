"""Print the README's fresh-machine commands, one per line, exactly as written there.

They are the lines of the fenced block between the `fresh-machine commands` markers in README.md.
CI runs what this prints, so the README cannot drift from what CI proves.

    python3 tools/readme_commands.py README.md
"""
import pathlib
import sys

BEGIN = "<!-- fresh-machine commands:begin -->"
END = "<!-- fresh-machine commands:end -->"


def commands(readme_text: str) -> list:
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1:
        raise ValueError(f"README needs exactly one {BEGIN} ... {END} block")
    block = readme_text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("```")]


if __name__ == "__main__":
    for line in commands(pathlib.Path(sys.argv[1]).read_text()):
        print(line)
