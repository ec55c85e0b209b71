"""File formats shared by the build and the runtime: ELF, msgpack, AMDGPU code objects, manifests,
and the environment variables' table (env.py), read by every room.

A leaf package: it imports nothing else from flyaot, so build_tools and runtime can both use it
without the data flow (kernel_defs -> build_tools -> prebuilt -> runtime) turning back on itself.
"""
