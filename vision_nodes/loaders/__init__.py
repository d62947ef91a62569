"""How weights become a PyTorch module: one file per architecture, behind one dispatch."""

from .common import ModelLoadError, check_weights, read_weights
from .torch_module import load_torch_module

__all__ = ['ModelLoadError', 'check_weights', 'load_torch_module', 'read_weights']
