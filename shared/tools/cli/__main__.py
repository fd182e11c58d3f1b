"""``python -m shared.tools.cli``: the ``ragbus`` console script."""

from shared.tools.cli import main

main()
