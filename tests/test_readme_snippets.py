"""README's "Using it" snippets run as pasted: each fenced python block of that section, alone, in a fresh
interpreter started outside the checkout (CPU tensors, so the emulator)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _snippets() -> list:
    text = README.read_text()
    section = re.search(r"^## Using it\n(.*?)^## ", text, re.S | re.M).group(1)
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)


def test_the_section_has_the_three_op_snippets():
    calls = "".join(_snippets())
    for op in ("pa_mqa_logits_fp4(", "pa_mqa_logits_fp4_varqlen(", "gemm_a16wfp4("):
        assert op in calls


@pytest.mark.parametrize("code", _snippets(), ids=lambda c: c.strip().splitlines()[-1][:40])
def test_snippet_runs_as_pasted(code, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FLYAOT_DEVICE"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
