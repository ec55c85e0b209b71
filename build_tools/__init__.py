"""Build tools: enumerate specs, compile them to code objects for one target of targets.py in worker
processes, gate them on their own metadata against that target's limits, and write content-addressed stores (manifest + code objects).

`python -m flyaot.build_tools --help` lists the commands. Nothing here is imported by the runtime
except `jit.compile_spec`, and only when a JIT fallback is actually taken.
"""
