"""Fixed-seed predictions of every estimator and inference method, to show that a refactor changes nothing.

``python tests/behaviour_reference.py`` fits small models (float64, fixed
``random_state``) and writes their predictions, loss curves and diagnostics
to ``tests/data/behaviour_reference.npz``; ``tests/test_behaviour_unchanged.py``
fits the same models with the current code and compares. The file committed
was written by the code before the redesign of the inference methods as
parameter objects (commit 1cc403b), so the test shows that the redesign
kept the numbers. The configurations are written once, in neutral terms;
:func:`make_estimator` maps them onto either API (flat parameters such as
``n_samples_predict`` and ``burn_in`` before, ``inference=SGHMC(...)`` after).

:data:`CONFIGS_2` covers what the first file does not (the other inference
methods of the MLPs, the other noise models, the torch-module estimators, the
GP classifier, the sampled sparse GPs, the deep GP, the mixture in batch and
online, recalibration); ``python tests/behaviour_reference.py --second``
writes it to ``tests/data/behaviour_reference_2.npz``. The file committed was
written at commit 85553e1, before the GP family, the likelihoods, the
predictive mixture and the fit template were redesigned (one shape for every
family), so that each step of that redesign can show it kept the numbers.
"""

from pathlib import Path

import numpy as np

REFERENCE = Path(__file__).parent / "data" / "behaviour_reference.npz"
REFERENCE_2 = Path(__file__).parent / "data" / "behaviour_reference_2.npz"

# name -> (estimator, method, method parameters, shared parameters)
CONFIGS = {
    "reg_mfvi": ("reg", "mfvi", {}, {}),
    "reg_mfvi_iblm_warmup": ("reg", "mfvi", {"init": "iblm", "kl_warmup_epochs": 2, "n_mc_train": 2}, {}),
    "reg_mfvi_early_stopping": ("reg", "mfvi", {}, {"early_stopping": True, "max_iter": 12}),
    "reg_mfvi_fixed_noise": ("reg", "mfvi", {"posterior_init_scale": 0.05}, {"noise_std": 0.3}),
    "reg_mfvi_warm_start": ("reg", "mfvi", {}, {"warm_start": True}),
    "reg_mc_dropout": ("reg", "mc_dropout", {"dropout_rate": 0.1}, {}),
    "reg_pbp": ("reg", "pbp", {}, {"max_iter": 3}),
    "reg_pbp_batch": ("reg", "pbp", {}, {"max_iter": 3, "batch_size": 8, "early_stopping": True}),
    "reg_vadam": ("reg", "vadam", {"n_mc_train": 2}, {}),
    "reg_sghmc": ("reg", "sghmc", {"burn_in": 3, "thinning": 2, "n_kept_samples": 4, "n_chains": 2}, {}),
    "reg_sghmc_warm_start": ("reg", "sghmc", {"burn_in": 2, "thinning": 1, "n_kept_samples": 4}, {"warm_start": True}),
    "reg_ensemble": ("reg", "ensemble", {"n_estimators": 3}, {}),
    "reg_ensemble_multioutput": ("reg", "ensemble", {"n_estimators": 2}, {"multioutput": True}),
    "clf_mfvi": ("clf", "mfvi", {}, {}),
    "clf_mc_dropout": ("clf", "mc_dropout", {"dropout_rate": 0.05}, {}),
    "clf_vadam": ("clf", "vadam", {}, {}),
    "clf_sghmc": ("clf", "sghmc", {"burn_in": 2, "thinning": 1, "n_kept_samples": 4}, {}),
    "clf_ensemble": ("clf", "ensemble", {"n_estimators": 2}, {}),
    # the sparse GP's recorded default optimiser: Adam on the ELBO (optimizer="auto" runs L-BFGS on the
    # collapsed bound on one full batch since; tests/gaussian_process/test_sparse_gp_exact.py checks it)
    "sgp_vfe": ("sgp", None, {}, {"variational_optimizer": "adam"}),
    "sgp_fitc_ngd_zero_mean": ("sgp", None, {}, {"objective": "fitc", "variational_optimizer": "ngd", "prior_mean": "zero"}),
    "sgp_partial_fit": ("sgp", None, {}, {"partial_fit": True}),
    "vae_gaussian": ("vae", None, {}, {}),
    "vae_bernoulli_warmup": ("vae", None, {}, {"likelihood": "bernoulli", "kl_warmup_epochs": 2, "n_mc_train": 2}),
}



def _gpi_prior():
    from skbayes.inference import GPInducedPrior

    return GPInducedPrior(n_measurement_points=8, n_function_draws=16, n_critic_steps=1, max_iter=5)


def _sghmc(**params):
    """A factory of SGHMC objects (a fresh object for each estimator)."""

    def make():
        from skbayes.inference import SGHMC

        return SGHMC(**params)

    return make


_SHORT_SGHMC = {"burn_in": 3, "thinning": 2, "n_kept_samples": 4}

# name -> (estimator, method, method parameters, shared parameters); a callable parameter value is
# called to make a fresh object for each estimator.
CONFIGS_2 = {
    "reg_whvi": ("reg", "whvi", {"n_flows": 1}, {}),
    "reg_whvi_no_flow": ("reg", "whvi", {}, {}),
    "reg_mnf": ("reg", "mnf", {"hidden_size": 8}, {}),
    "reg_bbh": ("reg", "bbh", {"generator_hidden_sizes": (8,), "n_weight_draws": 2, "n_prior_draws": 2}, {}),
    "reg_bbg": ("reg", "bbg", {"generator_hidden_sizes": (8,), "discriminator_hidden_sizes": (8,),
                               "n_weight_draws": 2, "n_prior_draws": 2}, {}),
    "reg_sghmc_gpi_prior": ("reg", "sghmc", {**_SHORT_SGHMC, "prior": _gpi_prior}, {}),
    "reg_mfvi_heteroscedastic": ("reg", "mfvi", {}, {"noise": "heteroscedastic"}),
    "reg_mc_dropout_heteroscedastic": ("reg", "mc_dropout", {}, {"noise": "heteroscedastic"}),
    "reg_ensemble_student_t": ("reg", "ensemble", {"n_estimators": 2}, {"noise": "student_t"}),
    "reg_sghmc_auto_noise": ("reg", "sghmc", dict(_SHORT_SGHMC), {"noise": "auto"}),
    "reg_mfvi_multioutput": ("reg", "mfvi", {}, {"multioutput": True}),
    "clf_whvi": ("clf", "whvi", {}, {}),
    "clf_mnf": ("clf", "mnf", {"hidden_size": 8}, {}),
    "clf_bbh": ("clf", "bbh", {"generator_hidden_sizes": (8,), "n_weight_draws": 2, "n_prior_draws": 2}, {}),
    "clf_bbg": ("clf", "bbg", {"generator_hidden_sizes": (8,), "discriminator_hidden_sizes": (8,),
                               "n_weight_draws": 2, "n_prior_draws": 2}, {}),
    "nnreg_mfvi": ("nnreg", "mfvi", {}, {}),
    "nnreg_mc_dropout": ("nnreg", "mc_dropout", {}, {}),
    "nnreg_ensemble": ("nnreg", "ensemble", {"n_estimators": 2}, {}),
    "nnreg_sghmc": ("nnreg", "sghmc", dict(_SHORT_SGHMC), {}),
    "nnclf_mfvi": ("nnclf", "mfvi", {}, {}),
    "nnclf_mc_dropout": ("nnclf", "mc_dropout", {}, {}),
    "sgp_sghmc": ("sgp", None, {}, {"inference": _sghmc(**_SHORT_SGHMC)}),
    "sgp_sghmc_dpp_prior": ("sgp", None, {}, {"inference": _sghmc(**_SHORT_SGHMC), "inducing_prior": "dpp"}),
    "sgp_matern_fixed_hyperparameters": ("sgp", None, {}, {"kernel": "matern52", "learn_hyperparameters": False,
                                                           "variational_optimizer": "adam"}),
    "sgp_warm_start": ("sgp", None, {}, {"warm_start": True, "variational_optimizer": "adam"}),
    "gpc_binary_probit": ("gpc", None, {}, {"likelihood": "probit"}),
    "gpc_binary_logit_ngd": ("gpc", None, {}, {"likelihood": "logit", "variational_optimizer": "ngd"}),
    "gpc_softmax": ("gpc3", None, {}, {"likelihood": "softmax"}),
    "gpc_robust_max": ("gpc3", None, {}, {"likelihood": "robustmax"}),
    "gpc_sghmc": ("gpc", None, {}, {"inference": _sghmc(**_SHORT_SGHMC)}),
    "dgp_two_layers": ("dgp", None, {}, {}),
    "dgp_three_layers": ("dgp", None, {}, {"n_layers": 3, "prior_mean": "zero"}),
    "gmm_batch": ("gmm", None, {}, {}),
    "gmm_batch_dirichlet_distribution": ("gmm", None, {}, {"weight_concentration_prior_type": "dirichlet_distribution",
                                                            "covariance_type": "diag"}),
    "gmm_online": ("gmm", None, {}, {"learning_method": "online", "batch_size": 16, "max_iter": 10}),
    "gmm_partial_fit": ("gmm", None, {}, {"learning_method": "online", "batch_size": 16, "partial_fit": True}),
    # the default when the reference was written (predictive="auto" recalibrates the model's own CDF since)
    "cal_gaussian": ("cal", None, {}, {"predictive": "gaussian"}),
    "cal_sample_y_prefit": ("cal", None, {}, {"predictive": "draws", "cv": "prefit"}),
    "vae_beta_iwae": ("vae", None, {}, {"beta": 0.5}),
    "vae_conditional": ("vae", None, {}, {"conditional": True}),
}

_NEW_METHODS = {
    "mfvi": "MeanFieldVI",
    "mc_dropout": "MCDropout",
    "pbp": "PBP",
    "vadam": "Vadam",
    "sghmc": "SGHMC",
    "ensemble": "DeepEnsemble",
    "whvi": "WHVI",
    "mnf": "MNF",
    "bbh": "BayesByHypernet",
    "bbg": "BayesByGAN",
}


def _config(name):
    return CONFIGS[name] if name in CONFIGS else CONFIGS_2[name]


def tiny_net(n_features, n_outputs, width=8):
    """The torch module of the ``nn*`` configurations: n_features-8-n_outputs, ReLU."""
    from torch import nn

    return nn.Sequential(nn.Linear(n_features, width), nn.ReLU(), nn.Linear(width, n_outputs))


def _has_param(cls, name):
    return name in cls().get_params()


def data(kind):
    """Small fixed data sets: X (n, 3) and targets for regression, classification or a VAE."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(64, 3))
    if kind in ("clf", "gpc3"):
        return X, (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.randn(64) > 0.5).astype(int) + (X[:, 2] > 1)
    if kind == "gpc":
        return X, (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.randn(64) > 0.5).astype(int)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(64)
    if kind == "multioutput":
        return X, np.column_stack([y, X[:, 2] ** 2 + 0.2 * rng.randn(64)])
    if kind == "bernoulli":
        return rng.uniform(0, 1, size=(64, 6)), None
    return X, y


_LOOP_SETTINGS = ("learning_rate_init", "beta_1", "beta_2", "max_iter", "early_stopping", "validation_fraction",
                  "n_iter_no_change", "tol")


def _method(method, method_params, params, cls):
    """The inference object of a Bayesian MLP configuration.

    The loop settings of ``params`` move onto the method where they now live
    (and are dropped for a method with a schedule of its own, which ignored
    them); with the earlier API, where the estimator held them, they stay.
    So does ``n_mc_predict``, the weight draws at prediction: onto the methods
    that draw weights, dropped for those with members (``SGHMC``,
    ``DeepEnsemble``), which predicted with all of them and ignored it. A
    method with a ``prior_scaling`` gets None, the prior of the references.
    """
    import skbayes.inference

    method_cls = getattr(skbayes.inference, _NEW_METHODS[method])
    if _has_param(method_cls, "prior_scaling"):  # the prior when the references were written: N(0, prior_scale^2)
        method_params = {"prior_scaling": None, **method_params}
    if "n_weight_draws" in method_params and not _has_param(method_cls, "n_weight_draws"):
        method_params = {**method_params}
        method_params["n_mc_train"] = method_params.pop("n_weight_draws")  # renamed: one name for the training draws
    if not _has_param(cls, "max_iter"):
        method_params = {**method_params}
        for key in _LOOP_SETTINGS:
            if key in params:
                value = params.pop(key)
                if key in method_cls().get_params():
                    method_params.setdefault(key, value)
    if "n_mc_predict" in params and not _has_param(cls, "n_mc_predict"):
        method_params = {**method_params}
        value = params.pop("n_mc_predict")
        if "n_mc_predict" in method_cls().get_params():
            method_params.setdefault("n_mc_predict", value)
    return method_cls(**method_params)


# The GP estimators' settings of the variational fit, and those of the sampled sparse GP, which moved to
# their inference objects (SparseVariational, SampledSparseGP).
_VARIATIONAL_PARAMS = {"objective": "objective", "variational_optimizer": "optimizer", "ngd_step_size": "ngd_step_size",
                       "n_mc_train": "n_mc_train", "learning_rate_init": "learning_rate_init", "max_iter": "max_iter",
                       "tol": "tol", "n_iter_no_change": "n_iter_no_change"}


def _gp_inference(params):
    """``params`` of a GP estimator in the installed API: with ``inference=`` objects when it takes them.

    The flat settings of the variational fit become a ``SparseVariational``; an MCMC method in
    ``inference`` (SGHMC) and ``inducing_prior`` become a ``SampledSparseGP`` whose variational start
    is that ``SparseVariational`` (the start read the estimator's settings before).
    """
    import skbayes.inference

    if not hasattr(skbayes.inference, "SparseVariational"):
        return params
    params = dict(params)
    variational = skbayes.inference.SparseVariational(
        **{new: params.pop(old) for old, new in _VARIATIONAL_PARAMS.items() if old in params})
    sampler = params.pop("inference", None)
    if sampler is None:
        params["inference"] = variational
    else:
        params["inference"] = skbayes.inference.SampledSparseGP(
            sampler, start=variational, **{key: params.pop(key) for key in ("inducing_prior",) if key in params})
    return params


def make_estimator(name):
    """The estimator of configuration ``name`` in the installed API, and its fit options."""
    import skbayes

    kind, method, method_params, shared = _config(name)
    from discovery import fresh

    shared, method_params = fresh(shared), fresh(method_params)
    options = {key: shared.pop(key, False) for key in ("multioutput", "partial_fit")}
    common = {"random_state": 0, "dtype": "float64", "device": "cpu"}
    if kind in ("nnreg", "nnclf"):
        # the torch-module estimators' defaults when the reference was written
        recorded = {"prior_scale": 1.0, "early_stopping": False, "n_iter_no_change": 50}
        if hasattr(skbayes, "BayesianNeuralNetRegressor"):
            cls = skbayes.BayesianNeuralNetRegressor if kind == "nnreg" else skbayes.BayesianNeuralNetClassifier
        else:
            cls = skbayes.BayesianMLPRegressor if kind == "nnreg" else skbayes.BayesianMLPClassifier
        params = {"module": tiny_net, "max_iter": 6, "batch_size": 16, "n_mc_predict": 7, **recorded, **common,
                  **shared}
        params["inference"] = _method(method, method_params, params, cls)
        if kind == "nnreg":
            params.setdefault("noise", "homoscedastic")
        return cls(**params), options
    if kind in ("gpc", "gpc3"):
        params = {"n_inducing": 12, "max_iter": 15, "learning_rate_init": 0.05, "n_mc_predict": 7, **common, **shared}
        return skbayes.SparseGPClassifier(**_gp_inference(params)), options
    if kind == "dgp":
        params = {"n_inducing": 10, "max_iter": 8, "batch_size": 16, "learning_rate_init": 0.02, "n_mc_train": 2,
                  "n_mc_predict": 5, **common, **shared}
        if "n_layers" in params and _has_param(skbayes.DeepGPRegressor, "hidden_layer_sizes"):
            params["hidden_layer_sizes"] = ("auto",) * (params.pop("n_layers") - 1)  # width "auto" is the default
        return skbayes.DeepGPRegressor(**_gp_inference(params)), options
    if kind == "gmm":
        params = {"n_components": 3, "max_iter": 25, **common, **shared}
        return skbayes.BayesianGaussianMixture(**params), options
    if kind == "cal":
        params = {"max_iter": 6, "n_mc_predict": 7}
        method = _method("mfvi", {}, params, skbayes.BayesianMLPRegressor)
        base = skbayes.BayesianMLPRegressor(
            (8,), inference=method, noise="homoscedastic", batch_size=16, **params, **common)
        params = {"cv": 2, **shared}
        if _has_param(skbayes.CalibratedRegressorCV, "pooling"):
            params["pooling"] = "linear"  # the folds' pool when the reference was written ("ambiguity" since)
        return skbayes.CalibratedRegressorCV(base, **params), options
    if kind in ("reg", "clf"):
        cls = skbayes.BayesianMLPRegressor if kind == "reg" else skbayes.BayesianMLPClassifier
        # the classifier's defaults when the reference was written (its defaults changed since)
        recorded = {"prior_scale": 1.0, "early_stopping": False, "n_iter_no_change": 50} if kind == "clf" else {}
        params = {"hidden_layer_sizes": (8,), "max_iter": 6, "batch_size": 16, **recorded, **common, **shared}
        if _has_param(cls, "n_samples_predict"):  # the API before the inference objects
            params["n_samples_predict"] = 7
            if "noise_std" in params:
                params["noise"] = params.pop("noise_std")
            method_params = dict(method_params)
            if "n_mc_train" in method_params:
                method_params["n_samples_train"] = method_params.pop("n_mc_train")
            params.update(inference=method, **method_params)
        else:
            params["n_mc_predict"] = 7
            params["inference"] = _method(method, method_params, params, cls)
            if kind == "reg" and _has_param(cls, "noise") and "noise" not in shared:
                params["noise"] = "homoscedastic"  # the reference's noise model (the default became "auto")
        return cls(**params), options
    if kind == "sgp":
        if "inference" in shared:  # the sampled GP: a short variational start, then the chains
            shared.setdefault("batch_size", 32)
        params = {"n_inducing": 12, "max_iter": 15, "learning_rate_init": 0.05, **common, **shared}
        if not _has_param(skbayes.SparseGPRegressor, "prior_mean") and "prior_mean" in params:
            params["mean"] = params.pop("prior_mean")
        return skbayes.SparseGPRegressor(**_gp_inference(params)), options
    params = {"n_components": 2, "hidden_layer_sizes": (10,), "max_iter": 5, "batch_size": 16, **common, **shared}
    if not _has_param(skbayes.VAE, "n_mc_train") and "n_mc_train" in params:
        params["n_samples_train"] = params.pop("n_mc_train")
    return skbayes.VAE(**params), options


def diagnostics(model):
    """Method-specific fitted results as a dict (either API)."""
    if hasattr(model, "inference_diagnostics_"):
        names = {"prior_std": "pbp_prior_std", "n_rejected": "pbp_n_rejected"}
        return {names.get(key, key): value for key, value in model.inference_diagnostics_.items()}
    return {name: getattr(model, f"{name}_") for name in ("rhat", "pbp_prior_std", "pbp_n_rejected") if hasattr(model, f"{name}_")}


def run(name):
    """Fit configuration ``name`` and return its outputs, a dict of arrays."""
    kind = _config(name)[0]
    model, options = make_estimator(name)
    if kind == "vae":
        X, _ = data("bernoulli" if model.likelihood == "bernoulli" else "reg")
        if getattr(model, "conditional", False):
            labels = (X[:, 0] > 0).astype(int)
            model.fit(X, labels)
            return {"transform": model.transform(X, labels), "score_samples": model.score_samples(X, labels),
                    "loss_curve": np.asarray(model.loss_curve_)}
        model.fit(X)
        return {
            "transform": model.transform(X),
            "score_samples": model.score_samples(X),
            "loss_curve": np.asarray(model.loss_curve_),
        }
    if kind == "gmm":
        X, _ = data("reg")
        if options["partial_fit"]:
            model.partial_fit(X[:32]).partial_fit(X[32:])
        else:
            model.fit(X)
        return {"proba": model.predict_proba(X), "score_samples": model.score_samples(X),
                "weights": model.weights_, "means": model.means_, "lower_bound": np.asarray(model.lower_bound_)}
    if kind == "cal":
        X, y = data("reg")
        if model.cv == "prefit":
            model.estimator.fit(X[:40], y[:40])
            model.fit(X[40:], y[40:])
        else:
            model.fit(X, y)
        mean, std = model.predict(X, return_std=True)
        lower, upper = model.predict_interval(X, coverage=0.9)
        out = {"mean": mean, "std": std, "lower": lower, "upper": upper, "cdf": model.predict_cdf(X, y),
               "quantiles": model.predict_quantiles(X[:10], [0.1, 0.5, 0.9])}
        if hasattr(model, "log_predictive_density"):  # the Gaussian base predictive has a density
            out["log_density"] = model.log_predictive_density(X, y)
        return out
    X, y = data("multioutput" if options["multioutput"] else {"nnreg": "reg", "nnclf": "clf"}.get(kind, kind))
    if options["partial_fit"]:
        model.partial_fit(X[:32], y[:32]).partial_fit(X[32:], y[32:])
    else:
        model.fit(X, y)
        if getattr(model, "warm_start", False):
            model.fit(X, y)
    out = {"loss_curve": np.asarray(model.loss_curve_)} if hasattr(model, "loss_curve_") else {}
    if kind in ("clf", "nnclf", "gpc", "gpc3"):
        parts = model.predict_uncertainty(X)
        out.update(proba=parts.proba, mutual_information=parts.mutual_information, expected_entropy=parts.expected_entropy)
        out["log_proba"] = model.predict_log_proba(X)
    else:
        out["mean"], out["std"] = model.predict(X, return_std=True)
        out["sample_y"] = model.sample_y(X[:10], n_samples=3, random_state=1)
        out["log_density"] = model.log_predictive_density(X, y)
        if kind in ("reg", "nnreg"):
            out["epistemic_std"] = model.predict_uncertainty(X).epistemic_std
    for key, value in diagnostics(model).items():
        if isinstance(value, dict):  # e.g. the fitted GP-induced prior's own diagnostics
            out.update({f"diag_{key}_{sub}": np.asarray(v, dtype=float) for sub, v in value.items()
                        if isinstance(v, (int, float, np.ndarray, list, tuple))})
        elif hasattr(value, "theta"):  # a fitted scikit-learn kernel: its log-hyperparameters
            out[f"diag_{key}"] = np.asarray(value.theta, dtype=float)
        else:
            out[f"diag_{key}"] = np.asarray(value, dtype=float)
    return out


def compute(configs=CONFIGS):
    """Outputs of every configuration of ``configs``, a dict ``"config/output" -> ndarray``."""
    import warnings

    arrays = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in configs:
            for key, value in run(name).items():
                arrays[f"{name}/{key}"] = value
    return arrays


def compare(arrays, reference=REFERENCE, rtol=1e-9, atol=1e-12):
    """Names of the outputs that differ from the reference file (missing ones included)."""
    ref = np.load(reference)
    return sorted(
        key for key in ref.files if key not in arrays or not np.allclose(arrays[key], ref[key], rtol=rtol, atol=atol)
    )


def main(argv):
    """``--check`` compares the current code with the reference file; otherwise (re)writes it.

    ``--second``: the same for :data:`CONFIGS_2` and :data:`REFERENCE_2`.
    """
    configs, reference = (CONFIGS_2, REFERENCE_2) if "--second" in argv else (CONFIGS, REFERENCE)
    arrays = compute(configs)
    if "--check" in argv:
        differ = compare(arrays, reference)
        print("identical to the reference" if not differ else f"{len(differ)} outputs differ: {differ}")
        return 1 if differ else 0
    reference.parent.mkdir(exist_ok=True)
    np.savez_compressed(reference, **arrays)
    print(f"wrote {len(arrays)} arrays for {len(configs)} configurations to {reference}")
    return 0


if __name__ == "__main__":
    import sys

    # Run as a script, sys.path starts with tests/: put the checkout holding
    # this file first, so that its skbayes is checked, not an installed one.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
