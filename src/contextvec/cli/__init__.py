"""The ``contextvec`` command line: one module per subcommand, assembled in :mod:`.main`."""
