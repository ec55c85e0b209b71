"""Roofline charts of benchmarks/gfx950_model.py's rows: modeled device time against the row's floor.

One PNG per family, log-log: x = the row's floor (flyaot.ops.floors), y = modeled device time, one
point per kernel (flyaot, upstream) and seed row, each labelled with its shape. The diagonal is the
floor itself (no kernel can lie below it); the dashed lines mark 1.5x and 2x of it.
Needs matplotlib (the `bench` extra: pip install flyaot[bench]).
"""
import math
import pathlib

TITLES = {"decode": "FP4 paged MQA logits, decode", "prefill": "FP4 paged MQA logits, prefill",
          "gemm": "BF16 x MXFP4 GEMM (A16WFP4)"}
STYLE = {"flyaot": dict(marker="o", color="tab:blue"), "upstream": dict(marker="s", color="tab:orange")}


def require():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'flyaot[bench]' "
                         "(or -r requirements/bench.txt)") from None


def roofline(rows, folder: pathlib.Path) -> list:
    """Write folder/roofline_<family>.png for every family among `rows` (gfx950_model.py's JSON rows);
    returns the paths written. Each file is written under a temporary name and renamed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fam in [f for f in TITLES if any(r["family"] == f for r in rows)]:
        pts = [r for r in rows if r["family"] == fam and r["device_us"]]
        if not pts:
            continue
        fig, ax = plt.subplots(figsize=(8, 6), dpi=110)
        for kind, style in STYLE.items():
            mine = [r for r in pts if r["kernel"] == kind]
            if mine:
                ax.scatter([r["floor_us"] for r in mine], [r["device_us"] for r in mine], label=kind,
                           zorder=3, **style)
        for r in pts:
            ax.annotate(r["shape"], (r["floor_us"], r["device_us"]), textcoords="offset points", xytext=(4, 3),
                        fontsize=7, color=STYLE[r["kernel"]]["color"])
        lo = min(min(r["floor_us"] for r in pts), min(r["device_us"] for r in pts)) / 1.5
        hi = max(max(r["floor_us"] for r in pts), max(r["device_us"] for r in pts)) * 1.5
        xs = [lo, hi]
        ax.plot(xs, xs, color="black", lw=1.2, label="floor (device time = floor)")
        for k, ls in ((1.5, "--"), (2.0, ":")):
            ax.plot(xs, [k * x for x in xs], color="gray", lw=0.8, ls=ls, label=f"{k:g}x floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi * 2)
        ax.set_xlabel("floor: max(HBM, MFMA, VALU) term at MI355X peaks (us)")
        ax.set_ylabel("modeled device time (us; kernels + -inf fill)")
        worst = max((r["device_us"] / r["floor_us"] for r in pts if r["kernel"] == "flyaot"), default=math.nan)
        ax.set_title(f"{TITLES[fam]}: timing MODEL of MI355X, not a measurement\n"
                     f"worst flyaot row at {worst:.1f}x its floor")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        path = folder / f"roofline_{fam}.png"
        tmp = folder / f".roofline_{fam}.png.tmp"
        fig.savefig(tmp, format="png")
        plt.close(fig)
        tmp.replace(path)
        written.append(path)
    return written
