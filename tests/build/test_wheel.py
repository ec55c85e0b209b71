"""The distribution as a user receives it: the wheel an index accepts, installed offline into a fresh
venv that has torch and nothing else (no flydsl, no numpy), its console script, the emulator extra,
and the sdist built with and without a C compiler."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import venv
import zipfile

import pytest

from tools import tag_wheel

REPO = pathlib.Path(__file__).resolve().parents[2]
STORE = REPO / "prebuilt" / "gfx950" / "manifest.json"     # the package's store of the default target
WHEEL_BUDGET = 20 * 1024 * 1024      # the full set is about 1 MB; a wheel past this is a packaging bug
# torch and the modules `import torch` pulls in; flydsl and numpy are deliberately absent.
TORCH_MODULES = ["torch", "torchgen", "functorch", "typing_extensions", "sympy", "mpmath", "networkx",
                 "jinja2", "markupsafe", "filelock", "fsspec", "certifi"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not STORE.exists(), reason="no prebuilt store: run `make prebuilt` (make test does)")]


def _link_modules(dest: pathlib.Path, names) -> None:
    dest.mkdir(exist_ok=True)
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        src = pathlib.Path(spec.origin)
        src = src.parent if src.name == "__init__.py" else src
        (dest / src.name).symlink_to(src)
        for libs in src.parent.glob(f"{name}.libs"):      # vendored shared libraries live beside the package
            (dest / libs.name).symlink_to(libs)


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLYAOT_", "PYTHON"))}
    env.update(extra)
    return env


def _manifest_keys() -> list:
    return [e["key"] for e in json.loads(STORE.read_text())["specs"].values()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(REPO)], check=True, timeout=600, cwd=dist)
    built = list(dist.glob("flyaot-*.whl"))
    assert len(built) == 1
    return tag_wheel.tag(built[0])


@pytest.fixture(scope="module")
def user_venv(wheel, tmp_path_factory):
    """A fresh venv with torch only (linked in, offline) and the wheel installed: {python, bin, site}."""
    root = tmp_path_factory.mktemp("user")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    _link_modules(root / "torch_only", TORCH_MODULES)
    (site / "torch_only.pth").write_text(str(root / "torch_only") + "\n")
    py = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps", "-q",
                    str(wheel)], check=True, timeout=600)
    return {"python": py, "bin": env_dir / "bin", "site": site, "root": root}


def _run(cmd, cwd, **env):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=_clean_env(**env), cwd=cwd,
                          timeout=600)


def test_wheel_carries_an_index_tag_within_its_size_budget(wheel):
    assert wheel.name.endswith(f"-cp310-abi3-{tag_wheel.PLATFORM_TAG}.whl"), wheel.name
    assert wheel.stat().st_size < WHEEL_BUDGET
    names = zipfile.ZipFile(wheel).namelist()
    assert sum(n.endswith(".co") for n in names) == len(_manifest_keys())
    # Developer tools and test-only families never ship; the emulator's ISA tables and the families do.
    assert [n for n in names if n.startswith("flyaot/tools/") or "gen_opcodes" in n] == []
    assert [n for n in names if "/probe/" in n or "emu_samples" in n or n.startswith("flyaot/tests/")] == []
    assert "flyaot/emu/isa/gfx950/opcodes.py" in names and "flyaot/kernel_defs/mqa_decode/kernel.py" in names
    launchers = [n for n in names if n.startswith("flyaot/runtime/_launch")]
    assert launchers and all(n.endswith(".abi3.so") for n in launchers), launchers
    # auditwheel agrees with the tag the wheel now carries
    assert tag_wheel._glibc(tag_wheel.lowest_policy(wheel)) <= tag_wheel._glibc(tag_wheel.PLATFORM_TAG)


def test_wheel_metadata_has_license_urls_and_classifiers(wheel):
    z = zipfile.ZipFile(wheel)
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    fields = [line.split(": ", 1) for line in meta.split("\n\n", 1)[0].splitlines() if ": " in line]
    has = {k for k, _ in fields}
    assert {"License", "Project-URL", "Classifier", "Requires-Python"} <= has, sorted(has)
    classifiers = {v for k, v in fields if k == "Classifier"}
    assert "Operating System :: POSIX :: Linux" in classifiers and "Environment :: GPU" in classifiers
    assert any("pytorch.org" in v for k, v in fields if k == "Project-URL")


def test_console_script_lists_every_spec_without_flydsl_or_numpy(user_venv, tmp_path):
    probe = _run([user_venv["python"], "-c", "import importlib.util as u; print(u.find_spec('flydsl'), "
                  "u.find_spec('numpy'))"], tmp_path)
    assert probe.stdout.split() == ["None", "None"], probe.stdout + probe.stderr
    out = _run([user_venv["bin"] / "flyaot", "list"], tmp_path)
    assert out.returncode == 0, out.stderr
    for key in _manifest_keys():
        assert key in out.stdout


def test_collect_env_is_env(user_venv, tmp_path):
    reports = []
    for verb in ("env", "collect-env"):
        out = _run([user_venv["bin"] / "flyaot", verb, "--json"], tmp_path)
        assert out.returncode == 0, out.stderr
        reports.append(json.loads(out.stdout))
    assert reports[0] == reports[1]
    assert reports[0]["versions"]["flydsl"] is None
    package = [s for s in reports[0]["stores"] if s["kind"] == "package"]
    assert package and package[0]["specs"] == len(_manifest_keys())


_GEMM_CALL = """
import torch, flyaot.ops as ops
from flyaot.kernel_defs.gemm_a16wfp4.reference import gemm_reference, random_weight
g = torch.Generator().manual_seed(3)
w, s = random_weight(256, 512, generator=g)
x = torch.randn(5, 512, generator=g).to(torch.bfloat16)
y = ops.gemm_a16wfp4(x, ops.prepare_mxfp4_weight(w, s))
ref = gemm_reference(x, w, s)
print(float((y.float() - ref.float()).norm() / ref.float().norm()))
"""


def test_cpu_call_without_numpy_names_the_extra(user_venv, tmp_path):
    out = _run([user_venv["python"], "-c", _GEMM_CALL], tmp_path)
    assert out.returncode != 0
    assert "needs numpy" in out.stderr and "pip install 'flyaot[emu]'" in out.stderr, out.stderr[-2000:]


def test_cpu_call_with_the_emu_extra_matches_the_reference(user_venv, tmp_path):
    extra = user_venv["root"] / "emu_extra"
    _link_modules(extra, ["numpy"])
    # A second venv sharing the first's packages plus numpy: the `emu` extra, offline.
    env_dir = tmp_path / "venv_emu"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    (site / "user.pth").write_text(f"{user_venv['site']}\n{user_venv['root'] / 'torch_only'}\n{extra}\n")
    out = _run([env_dir / "bin" / "python", "-c", _GEMM_CALL], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) <= 1e-4


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> pathlib.Path:
    dist = tmp_path_factory.mktemp("sdist")
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    built = list(dist.glob("flyaot-*.tar.gz"))
    assert len(built) == 1
    return built[0]


@pytest.mark.parametrize("compiler", [True, False], ids=["with-cc", "without-cc"])
def test_sdist_installs_with_and_without_a_c_compiler(sdist, compiler, tmp_path):
    target = tmp_path / "site"
    env = {} if compiler else {"CC": str(tmp_path / "no-such-cc")}
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "--target", str(target), str(sdist)], check=True, timeout=600, cwd=tmp_path,
                   env=_clean_env(**env), capture_output=True)
    pkg = target / "flyaot"
    assert len(list(pkg.glob("prebuilt/*/*.co"))) == len(_manifest_keys())
    assert bool(list(pkg.glob("runtime/_launch*.so"))) == compiler
    out = _run([sys.executable, "-c", "from flyaot.runtime.launchers import c_launcher_status as s; print(s())"],
               tmp_path, PYTHONPATH=str(target))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("available" if compiler else "unavailable"), out.stdout
