"""The ``pathweave`` command line: the top layer (it imports every other package, none imports it)."""
