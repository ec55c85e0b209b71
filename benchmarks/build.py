"""Build throughput: specs/second with 1 and 2 workers on the same spec sample (fresh caches, so
every spec really compiles), and the time of a no-op rebuild of the full shipped set.

    python benchmarks/build.py [--sample N] [--no-full-set]

The no-op figure uses the default build cache; if the full set is not cached yet, that run
compiles it first (reported separately) and then times the no-op rebuild.
"""
import argparse
import subprocess
import sys
import tempfile
import time


def run(*args):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "flyaot.build_tools", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"build failed:\n{proc.stdout}\n{proc.stderr}")
    return time.monotonic() - t0, proc.stdout.strip().splitlines()[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=24, help="specs in the throughput sample")
    ap.add_argument("--no-full-set", action="store_true", help="only the throughput sample (no full-set rebuild)")
    a = ap.parse_args()
    if a.sample < 1:
        ap.error(f"--sample must be >= 1, got {a.sample}")
    from flyaot.build_tools.spec_list import enumerate_specs
    specs = enumerate_specs()
    step = max(1, len(specs) // a.sample)
    sample = specs[::step][:a.sample]
    with tempfile.TemporaryDirectory() as tmp:
        import json
        misses = f"{tmp}/sample.jsonl"
        with open(misses, "w") as f:
            for s in sample:
                f.write(json.dumps({"family": s.family, "params": s.param_dict}) + "\n")
        rates = {}
        for jobs in (1, 2):
            secs, line = run("build", "--from-misses", misses, "--out", f"{tmp}/o{jobs}", "--cache",
                             f"{tmp}/c{jobs}", "--jobs", str(jobs))
            rates[jobs] = len(sample) / secs
            print(f"{jobs} worker(s): {len(sample)} specs in {secs:.1f}s = {rates[jobs]:.2f} specs/s ({line})")
        print(f"speedup 2 vs 1 workers: {rates[2] / rates[1]:.2f}x")
        if a.no_full_set:
            return
        secs, line = run("build", "--out", f"{tmp}/full")
        print(f"full set ({len(specs)} specs), first pass with the default cache: {secs:.1f}s ({line})")
        secs, line = run("build", "--out", f"{tmp}/full")
        print(f"no-op rebuild of the full set: {secs:.2f}s ({line})")


if __name__ == "__main__":
    main()
