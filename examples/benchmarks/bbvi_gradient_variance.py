"""The variance of the score-function and reparameterisation gradients of the ELBO on Bayesian logistic regression.

What it does
------------
Bayesian logistic regression (eq. 2.59 of the seed's thesis): y_n ~ Bern(sigma(theta^T [x_n, 1])),
theta ~ N(0, I), on scikit-learn's breast-cancer data (569 rows, 30 standardised features, so 31 weights).
For each Gaussian family (``mean_field``, ``full_rank``; :class:`skbayes.nn.bbvi.GaussianFamily`) and at two
points psi of the variational parameters (``init``: mean 0, standard deviation 0.1; ``fitted``: after 3,000
full-batch Adam steps of the reparameterisation gradient with 50 draws), it draws ``--repeats`` independent
estimates of the ELBO's gradient with S = ``--draws`` draws each, by

* ``score``: the score-function estimator (eqs. 2.63-2.64), no control variate;
* ``score + control variate``: with the per-coordinate control variate (eqs. 2.65-2.70), as
  ``BlackBoxVI(gradient="score")`` trains;
* ``reparameterization``: the pathwise gradient (eq. 2.73) of the expected log-likelihood with the KL in
  closed form, as ``BlackBoxVI()`` trains;

and reports the variance of each gradient coordinate over the repeats, averaged over the coordinates of the
mean (mu) and over those of the scale (the softplus-raw standard deviations, or the Cholesky factor's
entries), and each estimator's ratio to the reparameterisation gradient's. The gradients are of the full-data
ELBO (nats). The thesis's claim: the reparameterisation gradient's variance is far below the score
estimator's, even with control variates.

How to run
----------
::

    python examples/benchmarks/bbvi_gradient_variance.py --threads 1 --out bbvi_gradient_variance
"""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_lines, rows_script, run_saving  # noqa: E402

from skbayes.nn.bbvi import GaussianFamily, score_function_gradient  # noqa: E402

ESTIMATORS = ("score", "score + control variate", "reparameterization")


def add_arguments(parser):
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=300)


def logistic_data():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    phi = torch.tensor(np.hstack([X, np.ones((len(X), 1))]), dtype=torch.float64)
    return phi, torch.tensor(2.0 * y - 1.0, dtype=torch.float64)  # labels in {-1, +1}


def log_likelihood(z, phi, sign):
    """log p(y | theta_s) of each draw, shape (S,): sum_n log sigma(y_n theta^T x_n)."""
    return torch.nn.functional.logsigmoid(sign * (z @ phi.T)).sum(-1)


def gradient(family, estimator, phi, sign, draws, generator):
    """One estimate of d ELBO / d psi, flattened."""
    params = list(family.parameters())
    if estimator == "reparameterization":
        z = family.rsample(draws, generator)
        elbo = log_likelihood(z, phi, sign).mean() - family.kl(1.0)
        grads = torch.autograd.grad(elbo, params)
    else:
        z = family.rsample(draws, generator).detach()
        log_joint = log_likelihood(z, phi, sign) + family.prior(1.0).log_prob(z)
        grads, _ = score_function_gradient(family, z, log_joint, control_variate=estimator != "score")
    return [g.detach().reshape(-1) for g in grads]


def fitted_family(family_name, phi, sign, generator):
    family = GaussianFamily(phi.shape[1], family_name, init_scale=0.1, dtype=torch.float64)
    optimizer = torch.optim.Adam(family.parameters(), lr=1e-2)
    for _ in range(3000):
        optimizer.zero_grad()
        z = family.rsample(50, generator)
        loss = -(log_likelihood(z, phi, sign).mean() - family.kl(1.0))
        loss.backward()
        optimizer.step()
    return family


def markdown(report):
    lines = ["# Variance of the ELBO's gradient estimators on Bayesian logistic regression", "",
             f"Command: `python examples/benchmarks/bbvi_gradient_variance.py {' '.join(report['argv'])}`. "
             "Variance over repeated estimates of each gradient coordinate (full-data ELBO, nats), averaged over "
             "the mean's coordinates and over the scale's; ratio: to the reparameterisation gradient's.", "",
             "| family | point | estimator | variance (mean) | ratio | variance (scale) | ratio |",
             "|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        lines.append(f"| {row['family']} | {row['point']} | {row['estimator']} | {row['var_loc']:.3g} | "
                     f"{row['ratio_loc']:.3g} | {row['var_scale']:.3g} | {row['ratio_scale']:.3g} |")
    lines += [""] + environment_lines(report)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "bnn_methods", add_arguments)
    phi, sign = logistic_data()

    def body():
        for family_name in ("mean_field", "full_rank"):
            generator = torch.Generator().manual_seed(0)
            points = {"init": GaussianFamily(phi.shape[1], family_name, init_scale=0.1, dtype=torch.float64),
                      "fitted": fitted_family(family_name, phi, sign, generator)}
            for point, family in points.items():
                variances = {}
                for estimator in ESTIMATORS:
                    estimates = [gradient(family, estimator, phi, sign, args.draws, generator)
                                 for _ in range(args.repeats)]
                    loc = torch.stack([e[0] for e in estimates]).var(0)
                    scale = torch.stack([torch.cat(e[1:]) for e in estimates]).var(0)
                    if family_name == "full_rank":  # the upper triangle of the raw factor is not a parameter of q
                        mask = torch.tril(torch.ones(phi.shape[1], phi.shape[1], dtype=torch.bool)).reshape(-1)
                        scale = scale[mask]
                    variances[estimator] = (float(loc.mean()), float(scale.mean()))
                base = variances["reparameterization"]
                for estimator in ESTIMATORS:
                    var_loc, var_scale = variances[estimator]
                    report["rows"].append({"family": family_name, "point": point, "estimator": estimator,
                                           "draws": args.draws, "var_loc": var_loc, "var_scale": var_scale,
                                           "ratio_loc": var_loc / base[0], "ratio_scale": var_scale / base[1]})
                    print(family_name, point, estimator, f"{var_loc:.3g}", f"{var_scale:.3g}", flush=True)
                save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
