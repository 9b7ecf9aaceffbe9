r"""Uncertainty measures of a classifier's predictive distribution, shared by the classifiers.

A Bayesian classifier predicts through T draws of the class probabilities,
p_t(x) = p(y | theta_t, x) for weight draws theta_t (a Bayesian neural
network) or p(y | f_t(x)) for draws f_t(x) of a latent function (a Gaussian
process), and their mean \bar p approximates the predictive distribution.
:class:`ClassifierUncertaintyMixin` turns those draws into the measures of
[Gal2016]_, section 3.3.1 (entropies in nats):

- ``predictive_entropy`` (total) = H[\bar p] = -sum_c \bar p_c log \bar p_c;
- ``expected_entropy`` (aleatoric) = (1/T) sum_t H[p_t];
- ``mutual_information`` (epistemic, BALD [Houlsby2011]_) =
  predictive_entropy - expected_entropy >= 0;
- ``variation_ratio`` = 1 - max_c \bar p_c, the T -> infinity limit of
  Freeman's variation ratio ([Gal2016]_, eq. 3.19), which does not need
  sampled labels.

References
----------
%(ref_gal2016)s
%(ref_houlsby2011)s
"""

import numpy as np
import torch
from sklearn.utils import Bunch

from ._docstrings import fill, fill_doc

__doc__ = fill(__doc__)

__all__ = ["ClassifierUncertaintyMixin", "entropy", "probability_draw_measures"]


def entropy(p):
    """Entropy in nats along the last axis, with 0 log 0 = 0.

    Parameters
    ----------
    p : torch.Tensor of shape (..., n_classes)
        Probabilities summing to 1 along the last axis.

    Returns
    -------
    entropy : torch.Tensor of shape (...)
    """
    return -torch.special.xlogy(p, p).sum(-1)


def probability_draw_measures(p):
    """The draw averages behind the measures, for one block of rows.

    Parameters
    ----------
    p : torch.Tensor of shape (n_draws, n_rows, n_classes)
        Class probabilities under each draw.

    Returns
    -------
    proba : torch.Tensor of shape (n_rows, n_classes)
        \bar p, the mean over the draws.
    predictive_entropy : torch.Tensor of shape (n_rows,)
        H[\bar p].
    expected_entropy : torch.Tensor of shape (n_rows,)
        The mean over the draws of H[p_t].
    """
    mean = p.mean(0)
    return mean, entropy(mean), entropy(p).mean(0)


@fill_doc
class ClassifierUncertaintyMixin:
    """``predict_uncertainty`` and ``score_ood`` from draws of the class probabilities.

    The classifier provides ``_probability_draws(X, fn)``: it validates X,
    forms the class probabilities p of shape (n_draws, n_block_rows,
    n_classes) under its draws, block of rows by block of rows, and returns
    ``fn(p)`` gathered over the blocks as numpy arrays (see
    :meth:`skbayes.base.TorchEstimatorMixin._predict_in_blocks`).
    """

    def predict_uncertainty(self, X):
        r"""Per-sample uncertainty measures of the model average over the draws.

        With p_t the class probabilities under draw t of T and \bar p their
        mean (Gal 2016, section 3.3.1):

        - ``predictive_entropy`` (total) = H[\bar p] = -sum_c \bar p_c log \bar p_c;
        - ``expected_entropy`` (aleatoric) = (1/T) sum_t H[p_t];
        - ``mutual_information`` (epistemic, BALD, Houlsby et al. 2011) =
          predictive_entropy - expected_entropy >= 0;
        - ``variation_ratio`` = 1 - max_c \bar p_c, the T -> infinity limit of
          Freeman's variation ratio (Gal 2016, eq. 3.19), which does not need
          sampled labels.

        %(parameters_X)s

        Returns
        -------
        result : Bunch
            ``proba`` (\bar p) of shape (n_samples, n_classes) and the four
            measures above, each of shape (n_samples,), entropies in nats.

        %(predict_raises)s
        """
        proba, predictive_entropy, expected_entropy = self._probability_draws(X, probability_draw_measures)
        out = Bunch(proba=proba, predictive_entropy=predictive_entropy, expected_entropy=expected_entropy)
        # Clip round-off: the mutual information is >= 0 by Jensen's inequality.
        out.mutual_information = np.maximum(out.predictive_entropy - out.expected_entropy, 0.0)
        out.variation_ratio = 1.0 - out.proba.max(axis=1)
        return out

    def score_ood(self, X):
        """Out-of-distribution score: the mutual information (epistemic part).

        Higher means the draws disagree more about x, i.e. x is less like
        the training data.

        %(parameters_X)s

        Returns
        -------
        score : ndarray of shape (n_samples,)
            Mutual information in nats, in [0, log n_classes].
        """
        return self.predict_uncertainty(X).mutual_information
