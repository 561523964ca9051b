"""The ``faithjudge`` command line: ``main`` builds the app, one module per command group."""
