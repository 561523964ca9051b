"""``python -m faithjudge``: the ``faithjudge`` command."""

from faithjudge.cli.main import main

main()
