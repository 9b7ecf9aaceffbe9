"""Benchmark data: the UCI regression sets with their fixed splits, and a small MNIST.

The UCI sets of :data:`BUNDLED_UCI_DATASETS` and the MNIST images ship with
the package (``skbayes/datasets/data/``, its ``README.md`` gives each set's
origin, licence and split protocol): :func:`load_uci` and :func:`load_mnist`
read them offline. :func:`fetch_uci` also reads a local copy
(``SKBAYES_DATA_HOME``) and downloads the sets that are not bundled.
"""

from ._mnist import load_mnist
from ._uci import BUNDLED_UCI_DATASETS, UCI_DATASETS, fetch_uci, get_data_home, get_uci_split, load_uci

__all__ = ["BUNDLED_UCI_DATASETS", "UCI_DATASETS", "fetch_uci", "get_data_home", "get_uci_split",
           "load_mnist", "load_uci"]
