"""flyaot's store protocol in one place: a leaf above `formats` (imports only formats and targets).

A store is a directory of one target: `manifest.json` (formats.manifest's schema) beside the `<id>.co`
code objects it names; the package keeps one per target directory (`prebuilt/<arch>/`), the user
cache one per device target (`<cache>/<version>/<arch>/`).

  index    read: open and check a store, the precedence list of store locations, the index over them
  verify   the one checker (bounded read, hash, code object metadata) the loader and both CLIs use
  write    the one manifest writer; a whole store (build, merge) or one added entry (the JIT); the
           user cache's marker and clear-cache
  merge    shard stores into one
  lock     flock with a bounded wait
  files    bounded reads of regular files, atomic durable writes, names derived from id and target
  slots    an entry's argument slot table, checked and packed
  misses   the misses file (specs no store had)
"""
from .errors import FlyaotError, IntegrityError, LockTimeout, StoreError  # noqa: F401
