"""``python -m pubsubml.cli.registry``: the registry service's commands on their own."""

from __future__ import annotations


def test_the_registry_commands_start_without_the_other_groups() -> None:
    import subprocess
    import sys

    code = (
        "import sys, runpy; sys.argv = ['x', '--help']\n"
        "try:\n    runpy.run_module('pubsubml.cli.registry', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules and 'pubsubml.experiments' not in sys.modules\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr
