"""The exit statuses of a user mistake and of an interrupted command, apart from
:func:`mtrl.cli.main` so that the commands that return them (``mtrl validate``, ``mtrl tune``)
need not import the package that dispatches to them."""

EXIT_USER_ERROR = 2

#: Stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
