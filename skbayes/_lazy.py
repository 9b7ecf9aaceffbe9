"""Module attributes imported on first use (PEP 562), for the package's ``__init__`` and the command's."""

import importlib
import sys


def lazy_attributes(module_name, attributes, submodules=()):
    """The ``__getattr__`` and ``__dir__`` of a module whose public names are imported on first use.

    Parameters
    ----------
    module_name : str
        The module's ``__name__``; its ``__all__`` lists its public names.
    attributes : dict of str to str
        Name -> the module, relative to ``module_name``'s package (e.g.
        ``".pipeline"``), that defines it. The first access imports that
        module and keeps the value in the module's namespace.
    submodules : iterable of str, default=()
        Subpackages or submodules returned, imported, on first access.

    Returns
    -------
    __getattr__, __dir__ : callable
        To be assigned to the module's ``__getattr__`` and ``__dir__``.
        ``__getattr__`` raises ``AttributeError`` for any other name.
    """
    submodules = frozenset(submodules)

    def __getattr__(name):
        if name in attributes:
            value = getattr(importlib.import_module(attributes[name], module_name), name)
        elif name in submodules:
            value = importlib.import_module(f".{name}", module_name)
        else:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__():
        module = sys.modules[module_name]
        return sorted(set(vars(module)) | set(module.__all__) | submodules)

    return __getattr__, __dir__
