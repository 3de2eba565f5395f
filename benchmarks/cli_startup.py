"""Start-up of the command line and the client: lazy package faces against eager ones.

Package faces import their modules on first use (``pubsubml.lazy``).  Each case below runs in a
fresh interpreter; its reference, run alternately with it in the same process, is the same case
with every package face it touched resolved eagerly (each name of each face's ``__all__``
imported, until no new face appears), which is what the faces cost when they imported their
modules themselves (``pubsubml.methods`` and ``pubsubml.cli``, lazy before, are left lazy).  Wall seconds, median over ``--repeats``.  Run::

    .venv/bin/python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# After the case: resolve every name of every lazy face now loaded, until no new face appears.
EAGER = """
import sys as _sys
_seen = set()
while True:
    _faces = [
        m for n, m in list(_sys.modules.items())
        if n.startswith("pubsubml.") and n not in _seen and "__getattr__" in vars(m)
        and n not in ("pubsubml.methods", "pubsubml.cli")
        and hasattr(m, "__all__")
    ]
    if not _faces:
        break
    for _face in _faces:
        _seen.add(_face.__name__)
        for _name in _face.__all__:
            getattr(_face, _name)
"""


def cases(workdir: Path) -> dict[str, str]:
    """Name -> Python code that does what the command or import does."""
    key = workdir / "bench.key"
    return {
        "interpreter (python -c pass)": "pass",
        "pubsubml --help": (
            "import sys\nfrom pubsubml.cli import main\nsys.argv = ['pubsubml', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass"
        ),
        "pubsubml keygen": (
            "import sys, os\nfrom pubsubml.cli import main\n"
            f"for p in ({str(key)!r}, {str(key) + '.pub'!r}):\n"
            "    os.path.exists(p) and os.remove(p)\n"
            f"sys.argv = ['pubsubml', 'keygen', '--out', {str(key)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass"
        ),
        "import pubsubml.registry.client": "import pubsubml.registry.client",
        "import pubsubml.artifacts.signing": "import pubsubml.artifacts.signing",
        "import pubsubml.methods.pubsub.storage.reader": "import pubsubml.methods.pubsub.storage.reader",
    }


def run_once(code: str) -> float:
    """Wall seconds of a fresh interpreter running ``code``."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=300,
    )
    return time.perf_counter() - start


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print("| case | lazy s (median) | eager faces s (median) | lazy / eager |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in cases(Path(tmp)).items():
            lazy, eager = [], []
            run_once(code)  # warm the file cache and the byte code
            for _ in range(args.repeats):  # alternating, so drifts of the machine hit both
                lazy.append(run_once(code))
                eager.append(run_once(code + "\n" + EAGER))
            a, b = statistics.median(lazy), statistics.median(eager)
            print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
