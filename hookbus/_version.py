"""The package version, in one place: ``pyproject.toml`` reads it (setuptools ``attr:``) and
``hookbus --version`` prints it without importing ``importlib.metadata`` (about 30 ms here,
more than a whole bare interpreter start)."""

__version__ = "0.1.0"
