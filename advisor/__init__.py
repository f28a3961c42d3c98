"""advisor: measure where GPU memory and time go in real training steps, and recommend the
fastest training setting that fits a GPU."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("advisor")
except PackageNotFoundError:  # run from a checkout without installing (the GPU machine)
    __version__ = "0.1.0+checkout"
