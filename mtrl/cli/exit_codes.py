"""The exit status of a user mistake, apart from :func:`mtrl.cli.main` so that the commands
that return it (``mtrl validate``) need not import the package that dispatches to them."""

EXIT_USER_ERROR = 2
