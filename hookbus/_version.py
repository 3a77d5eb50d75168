"""The package version, in one place: ``pyproject.toml`` reads it (setuptools ``attr:``) and
``hookbus --version`` prints it without importing ``importlib.metadata``, which costs more
than a whole bare interpreter start (docs/performance.md)."""

__version__ = "0.1.0"
