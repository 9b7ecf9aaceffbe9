"""``python -m skbayes``: the ``skbayes`` command (see :func:`skbayes._cli.main`)."""

from ._cli import main

if __name__ == "__main__":
    main()
