"""jig's gate for a Python Run, first on ``PYTHONPATH`` as ``sitecustomize``.

jig executes the interpreter with a pipe at descriptor 3, the gate, so that
a daemon can start the next Run's interpreter ahead of it. ``site`` imports
this module before the script's directory is on ``sys.path``: it loads the
SDK, then waits for the one byte jig writes once the Run is recorded and
closes the gate, before Python runs the package's entrypoint, so no
package code runs before its Run. For a Run started at once, the byte is
already there. The runtime's own ``sitecustomize``, if it has one, runs
after the gate, as it would have without this module.

The SDK is loaded ahead only when the package cannot shadow what it loads:
a module or package at the package's root named like a standard-library
module or ``jiggy`` comes first on ``sys.path`` for the Run, so then the
SDK is left to the Run to import, as it would have been without the gate.
"""

import os
import sys


def _shadowed():
    """Could the script's directory shadow a module the SDK loads?"""
    names = getattr(sys, "stdlib_module_names", None)
    if names is None or not sys.argv or not sys.argv[0]:
        return True
    try:
        entries = os.listdir(os.path.dirname(os.path.abspath(sys.argv[0])))
    except OSError:
        return True
    stems = {entry.split(".", 1)[0] for entry in entries}
    return not stems.isdisjoint(set(names) | {"jiggy"})


if not _shadowed():
    import jiggy.flow  # noqa: F401  (the SDK, loaded ahead of the Run)

_GATE_FD = 3
# Exit status when jig let go of the gate without opening it.
_EXIT_ABANDONED = 70


def _wait_at_gate():
    try:
        opened = os.read(_GATE_FD, 1)
    finally:
        os.close(_GATE_FD)
    if len(opened) != 1:
        os._exit(_EXIT_ABANDONED)


def _chain():
    """Run the ``sitecustomize`` this one shadows, as ``site`` would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_wait_at_gate()
_chain()
