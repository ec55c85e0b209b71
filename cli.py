"""`python -m flyaot`: the runtime's commands (env, list, verify, clear-cache) plus the ops' selftest,
bench and model. It sits above both rooms, so the runtime never imports the ops. Arguments are parsed
and checked before torch is imported."""
from .runtime import commands as runtime_commands
from .runtime.commands import UsageError

# --device spellings: torch calls a HIP device "cuda", so rocm and hip mean the same GPU path.
DEVICES = {"cpu": "cpu", "emu": "cpu", "cuda": "cuda", "rocm": "cuda", "hip": "cuda"}


def _hook_command(name: str):
    def run(a, config) -> int:
        from .ops import hooks     # imports torch and registers the ops: only for these commands
        return getattr(hooks, f"cmd_{name}")(a, config)
    return run


def _hook_arguments(parser) -> None:
    parser.add_argument("--family", action="append", help="only this family (repeatable)")
    parser.add_argument("--device", choices=sorted(DEVICES), type=str.lower,
                        help="cpu (alias emu: the gfx950 emulator on CPU tensors) or cuda (aliases rocm, hip: the "
                             "GPU torch drives); default: cpu with FLYAOT_DEVICE=emu or without a GPU, else cuda")
    parser.add_argument("--json", action="store_true", help="one JSON document of every case, at the end")


# MODEL_SHAPES[family] = (names of the required sizes, names of the optional ones with their defaults)
MODEL_SHAPES = {
    "gemm": (("N", "K", "M"), ()),
    "decode": (("B", "NEXT_N", "MAX_CTX"), (("HEADS", 64),)),
    "prefill": (("B", "Q", "KV"), (("HEADS", 64),)),
    "fp8": (("B", "NEXT_N", "MAX_CTX"), (("HEADS", 64),)),
    "fp8-varctx": (("B", "NEXT_N", "MAX_CTX"), (("HEADS", 64),)),
    "fp8-prefill": (("S", "S_KV"), (("HEADS", 64),)),
}
MODEL_WHAT = {"N": "output features", "K": "reduction (input features)", "M": "tokens (rows of x)",
              "B": "batch", "NEXT_N": "new tokens per sequence", "MAX_CTX": "context length",
              "Q": "query rows per sequence", "KV": "context length", "HEADS": "query heads",
              "S": "query rows", "S_KV": "keys"}
_FP8_DECODE_RULES = ((lambda s: s["NEXT_N"] <= 4, "NEXT_N (new tokens per sequence) must be 1-4"),
                     (lambda s: s["HEADS"] in (32, 64), "HEADS (query heads) must be 32 or 64"))
# MODEL_RULES[op]: (holds(shape), what it says when it does not) of the sizes the op's kernels take
MODEL_RULES = {"fp8": _FP8_DECODE_RULES, "fp8-varctx": _FP8_DECODE_RULES,
               "fp8-prefill": ((lambda s: s["S_KV"] >= s["S"], "S_KV (keys) must be >= S (query rows)"),
                               (lambda s: s["HEADS"] in (32, 64), "HEADS (query heads) must be 32 or 64"))}
# A sampling error above this is worth a warning; the default sample count grows until it is below.
SAMPLING_WARN = 0.10
DEFAULT_SAMPLES, MAX_SAMPLES = 16, 256


def _selftest_arguments(parser) -> None:
    _hook_arguments(parser)
    parser.add_argument("--sanitize", action="store_true",
                        help="run on the emulator under its sanitizer (races, waits, hazards, uninitialised "
                             "reads: FLYAOT_EMU_SANITIZE=1)")


def _model_arguments(parser) -> None:
    usage = "; ".join(f"{f} {' '.join(req)}{''.join(f' [{n}]' for n, _ in opt)}" for f, (req, opt) in MODEL_SHAPES.items())
    parser.add_argument("family", metavar="OP", help=f"one of {', '.join(MODEL_SHAPES)}")
    parser.add_argument("shape", nargs="*", metavar="SIZE", help=f"the op's sizes: {usage}")
    parser.add_argument("--samples", type=int, default=None,
                        help=f"workgroups emulated per launch (default: from {DEFAULT_SAMPLES}, raised up to "
                             f"{MAX_SAMPLES} until the sampling error is below {100 * SAMPLING_WARN:.0f}%%)")
    parser.add_argument("--json", action="store_true")


def model_shape(family: str, sizes) -> dict:
    """{size name: value} of `flyaot model`'s arguments, or a UsageError saying what is expected."""
    if family not in MODEL_SHAPES:
        raise UsageError(f"unknown op {family!r} (ops: {', '.join(MODEL_SHAPES)})")
    req, opt = MODEL_SHAPES[family]
    names = list(req) + [n for n, _ in opt]
    form = f"{family} {' '.join(req)}{''.join(f' [{n}]' for n, _ in opt)}"
    if not len(req) <= len(sizes) <= len(names):
        raise UsageError(f"{family} takes {len(req)}{f'-{len(names)}' if opt else ''} sizes ({form}), "
                         f"got {len(sizes)}: {' '.join(sizes) or 'none'}")
    defaults = dict(opt)
    shape = {}
    for name, raw in zip(names, sizes):
        try:
            shape[name] = int(raw)
        except ValueError:
            raise UsageError(f"{name} ({MODEL_WHAT[name]}) must be an integer, got {raw!r}") from None
        if shape[name] < 1:
            raise UsageError(f"{name} ({MODEL_WHAT[name]}) must be >= 1, got {shape[name]}")
    shape = {n: shape.get(n, defaults.get(n)) for n in names}
    for holds, what in MODEL_RULES.get(family, ()):
        if not holds(shape):
            raise UsageError(f"{family}: {what}, got {', '.join(f'{n}={x}' for n, x in shape.items())}")
    return shape


def _model(a, config) -> int:
    import json

    shape = model_shape(a.family, a.shape)
    if a.samples is not None and a.samples < 1:
        raise UsageError(f"--samples must be >= 1, got {a.samples}")
    from .ops import modeled      # the emulator's timing model: a MODEL of MI355X time, said so in its output
    from .runtime import progress
    progress.plain_lines(True)
    samples = a.samples or DEFAULT_SAMPLES
    while True:
        r = modeled.modeled_us(a.family, *shape.values(), samples=samples)
        worst = max((err for _, _, err in r["kernels"]), default=0.0)
        if a.samples is not None or worst <= SAMPLING_WARN or samples >= MAX_SAMPLES:
            break
        samples = min(4 * samples, MAX_SAMPLES)
    terms = [(f"kernel {name}", us, err) for name, us, err in r["kernels"]]
    if r["fill_us"]:
        terms.append(("-inf fill of the logits", r["fill_us"], None))
    terms.append(("launch overhead", r["launch_us"], None))
    warn = (f"sampling error {100 * worst:.0f}% is above {100 * SAMPLING_WARN:.0f}%: "
            f"{'pass a larger --samples' if samples < MAX_SAMPLES or a.samples else 'the estimate is rough'}"
            if worst > SAMPLING_WARN else None)
    v = r["validation_error"]
    f = modeled.floor(a.family, *shape.values())
    floor = {"us": f.us, "bound": f.bound, "hbm_us": f.hbm_us, "mfma_us": f.mfma_us, "valu_us": f.valu_us,
             "device_us": r["device_us"], "ratio": r["device_us"] / f.us}
    if a.json:
        print(json.dumps({"op": a.family, "shape": shape, "us": r["us"], "samples": samples,
                          "terms": [{"term": n, "us": us, "sampling_error": e} for n, us, e in terms],
                          "floor": floor, "validation_error": {"geomean": v[0], "max": v[1]} if v else None,
                          "warning": warn, "note": "a model of MI355X time, not a measurement"}, indent=1))
        return 0
    dims = ", ".join(f"{n}={x}" for n, x in shape.items())
    print(f"{a.family} {dims}: modeled MI355X time {r['us']:.2f} us  (a MODEL estimate, not a measurement)")
    for name, us, err in terms:
        print(f"  + {name}: {us:.2f} us" + (f" (sampling error {100 * err:.0f}%)" if err is not None else ""))
    print(f"  = {sum(us for _, us, _ in terms):.2f} us  ({samples} workgroups sampled per launch)")
    print(f"  floor {f.us:.2f} us ({f.bound}-bound; HBM {f.hbm_us:.2f}, MFMA {f.mfma_us:.2f}, VALU {f.valu_us:.2f} us): "
          f"device time {r['device_us']:.2f} us = {floor['ratio']:.2f}x the floor")
    if v:
        print(f"  model validation on held-out MI355X measurements of this family: geomean |error| "
              f"{100 * v[0]:.0f}%, max |error| {100 * v[1]:.0f}%")
    else:
        print("  model validation: no held-out MI355X measurements of this op")
    if warn:
        import sys
        print(f"flyaot model: warning: {warn}", file=sys.stderr)
    return 0


COMMANDS = (("selftest", "each family against its torch reference", _selftest_arguments, _hook_command("selftest")),
            ("bench", "each family's benchmark", _hook_arguments, _hook_command("bench")),
            ("model", "modeled MI355X time of an op at a shape (the emulator's timing model; not a measurement)",
             _model_arguments, _model))


def main(argv=None) -> int:
    return runtime_commands.main(argv, extra_commands=COMMANDS)
