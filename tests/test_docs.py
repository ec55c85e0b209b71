"""The repository documents itself: sources point into docs/, and every such pointer resolves.

- No Python file cites the team's external semantics notes or their numbered sections; the facts
  live in docs/ (docs/README.md lists the pages).
- Every `docs/<page>.md[#anchor]` mentioned in a .py or .md file, and every relative link in a .md
  file, names an existing file, and an existing heading when it has an anchor (GitHub's heading
  slugs).
"""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Outside a git checkout (an unpacked sdist): the walk skips these, dot folders and virtual environments.
SKIP_DIRS = {"prebuilt", "__pycache__", "build", "dist"}
THIS = pathlib.Path(__file__).resolve()

# Spelled in pieces so this file does not match itself.
FORBIDDEN = (("kernel_" + "semantics", "an external notes file"), ("\u00a7", "a section sign"))

DOCS_POINTER = re.compile(r"docs/[\w./-]+?\.md(?:#[\w-]+)?")
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def _repo_files() -> list:
    """The repository's own files: what git tracks or would track (so a `.venv` inside the clone, as
    README sets one up, and every other ignored folder stay out)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True).stdout
        return [ROOT / name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts[:-1]
        if any(p in SKIP_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        if any((ROOT.joinpath(*parts[:i + 1]) / "pyvenv.cfg").exists() for i in range(len(parts))):
            continue
        if path.is_file():
            out.append(path)
    return out


def _files(suffix: str) -> list:
    return sorted(p for p in _repo_files() if p.name.endswith(suffix))


def _slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(md: pathlib.Path) -> set:
    seen, out, in_code = {}, set(), False
    for line in md.read_text().splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        m = re.match(r"#{1,6}\s+(.*)", line)
        if in_code or not m:
            continue
        base = _slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _problem(target: pathlib.Path, anchor: str):
    if not target.is_file():
        return f"no file {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}"
    if anchor and target.suffix == ".md" and anchor not in _anchors(target):
        return f"no section #{anchor} in {target.relative_to(ROOT)}"
    return None


def _md_links(md: pathlib.Path):
    in_code = False
    for n, line in enumerate(md.read_text().splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        for link in MD_LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", link):      # http:, https:, mailto:
                continue
            yield n, link


def test_no_python_file_cites_external_notes():
    hits = []
    for path in _files(".py"):
        if path.resolve() == THIS:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for needle, what in FORBIDDEN:
                if needle in line:
                    hits.append(f"{path.relative_to(ROOT)}:{n}: cites {what}")
    assert not hits, "point into docs/ instead:\n" + "\n".join(hits)


@pytest.mark.parametrize("suffix", [".py", ".md"])
def test_docs_pointers_resolve(suffix):
    broken = []
    for path in _files(suffix):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for ref in DOCS_POINTER.findall(line):
                page, _, anchor = ref.partition("#")
                why = _problem(ROOT / page, anchor)
                if why:
                    broken.append(f"{path.relative_to(ROOT)}:{n}: {ref}: {why}")
    assert not broken, "\n".join(broken)


def test_markdown_relative_links_resolve():
    broken = []
    for md in _files(".md"):
        for n, link in _md_links(md):
            page, _, anchor = link.partition("#")
            target = (md.parent / page).resolve() if page else md
            why = _problem(target, anchor)
            if why:
                broken.append(f"{md.relative_to(ROOT)}:{n}: {link}: {why}")
    assert not broken, "\n".join(broken)


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in _files(".md")
             if p.is_relative_to(ROOT / "docs") and p.name != "README.md"]
    missing = [p for p in pages if f"({p})" not in index]
    assert pages and not missing, f"docs/README.md does not link {missing}"


@pytest.mark.parametrize("with_git", [True, False])
def test_the_walk_leaves_out_virtual_environments(tmp_path, monkeypatch, with_git):
    """README puts the venv at .venv inside the clone: its site-packages' markdown is not the repo's."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "page.md").write_text("# page\n")
    for venv in (".venv", "env2"):
        site = tmp_path / venv / "lib" / "site-packages" / "pkg"
        site.mkdir(parents=True)
        (tmp_path / venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (site / "README.md").write_text("[broken](nowhere.md)\n")
    if with_git:
        (tmp_path / ".gitignore").write_text("/.venv/\n/env2/\n")
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in _files(".md")] == ["guide/page.md"]
