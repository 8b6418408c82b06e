"""``python -m pathweave_cli``: the ``pathweave`` command."""

from pathweave_cli.main import app

app(prog_name="pathweave")
