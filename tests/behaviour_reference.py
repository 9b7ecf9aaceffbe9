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
"""

from pathlib import Path

import numpy as np

REFERENCE = Path(__file__).parent / "data" / "behaviour_reference.npz"

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
    "sgp_vfe": ("sgp", None, {}, {}),
    "sgp_fitc_ngd_zero_mean": ("sgp", None, {}, {"objective": "fitc", "variational_optimizer": "ngd", "prior_mean": "zero"}),
    "sgp_partial_fit": ("sgp", None, {}, {"partial_fit": True}),
    "vae_gaussian": ("vae", None, {}, {}),
    "vae_bernoulli_warmup": ("vae", None, {}, {"likelihood": "bernoulli", "kl_warmup_epochs": 2, "n_mc_train": 2}),
}

_NEW_METHODS = {
    "mfvi": "MeanFieldVI",
    "mc_dropout": "MCDropout",
    "pbp": "PBP",
    "vadam": "Vadam",
    "sghmc": "SGHMC",
    "ensemble": "DeepEnsemble",
}


def _has_param(cls, name):
    return name in cls().get_params()


def data(kind):
    """Small fixed data sets: X (n, 3) and targets for regression, classification or a VAE."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(64, 3))
    if kind == "clf":
        return X, (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.randn(64) > 0.5).astype(int) + (X[:, 2] > 1)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(64)
    if kind == "multioutput":
        return X, np.column_stack([y, X[:, 2] ** 2 + 0.2 * rng.randn(64)])
    if kind == "bernoulli":
        return rng.uniform(0, 1, size=(64, 6)), None
    return X, y


def make_estimator(name):
    """The estimator of configuration ``name`` in the installed API, and its fit options."""
    import skbayes

    kind, method, method_params, shared = CONFIGS[name]
    shared = dict(shared)
    options = {key: shared.pop(key, False) for key in ("multioutput", "partial_fit")}
    common = {"random_state": 0, "dtype": "float64", "device": "cpu"}
    if kind in ("reg", "clf"):
        cls = skbayes.BayesianMLPRegressor if kind == "reg" else skbayes.BayesianMLPClassifier
        # the classifier's defaults when the reference was written (its defaults changed since)
        recorded = {"prior_scale": 1.0, "early_stopping": False, "n_iter_no_change": 50} if kind == "clf" else {}
        params = {"hidden_layer_sizes": (8,), "max_iter": 6, "batch_size": 16, **recorded, **common, **shared}
        if _has_param(cls, "n_mc_predict"):
            import skbayes.inference

            params["n_mc_predict"] = 7
            params["inference"] = getattr(skbayes.inference, _NEW_METHODS[method])(**method_params)
            if kind == "reg" and _has_param(cls, "noise"):
                params["noise"] = "homoscedastic"  # the reference's noise model (the default became "auto")
        else:
            params["n_samples_predict"] = 7
            if "noise_std" in params:
                params["noise"] = params.pop("noise_std")
            method_params = dict(method_params)
            if "n_mc_train" in method_params:
                method_params["n_samples_train"] = method_params.pop("n_mc_train")
            params.update(inference=method, **method_params)
        return cls(**params), options
    if kind == "sgp":
        params = {"n_inducing": 12, "max_iter": 15, "learning_rate_init": 0.05, **common, **shared}
        if not _has_param(skbayes.SparseGPRegressor, "prior_mean") and "prior_mean" in params:
            params["mean"] = params.pop("prior_mean")
        return skbayes.SparseGPRegressor(**params), options
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
    kind = CONFIGS[name][0]
    model, options = make_estimator(name)
    if kind == "vae":
        X, _ = data("bernoulli" if model.likelihood == "bernoulli" else "reg")
        model.fit(X)
        return {
            "transform": model.transform(X),
            "score_samples": model.score_samples(X),
            "loss_curve": np.asarray(model.loss_curve_),
        }
    X, y = data("multioutput" if options["multioutput"] else kind)
    if options["partial_fit"]:
        model.partial_fit(X[:32], y[:32]).partial_fit(X[32:], y[32:])
    else:
        model.fit(X, y)
        if getattr(model, "warm_start", False):
            model.fit(X, y)
    out = {"loss_curve": np.asarray(model.loss_curve_)}
    if kind == "clf":
        parts = model.predict_uncertainty(X)
        out.update(proba=parts.proba, mutual_information=parts.mutual_information, expected_entropy=parts.expected_entropy)
        out["log_proba"] = model.predict_log_proba(X)
    else:
        out["mean"], out["std"] = model.predict(X, return_std=True)
        out["sample_y"] = model.sample_y(X[:10], n_samples=3, random_state=1)
        out["log_density"] = model.log_predictive_density(X, y)
        if kind == "reg":
            out["epistemic_std"] = model.predict_uncertainty(X).epistemic_std
    for key, value in diagnostics(model).items():
        out[f"diag_{key}"] = np.asarray(value, dtype=float)
    return out


def compute():
    """Outputs of every configuration, a dict ``"config/output" -> ndarray``."""
    import warnings

    arrays = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in CONFIGS:
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
    """``--check`` compares the current code with the reference file; otherwise (re)writes it."""
    arrays = compute()
    if "--check" in argv:
        differ = compare(arrays)
        print("identical to the reference" if not differ else f"{len(differ)} outputs differ: {differ}")
        return 1 if differ else 0
    REFERENCE.parent.mkdir(exist_ok=True)
    np.savez_compressed(REFERENCE, **arrays)
    print(f"wrote {len(arrays)} arrays for {len(CONFIGS)} configurations to {REFERENCE}")
    return 0


if __name__ == "__main__":
    import sys

    # Run as a script, sys.path starts with tests/: put the checkout holding
    # this file first, so that its skbayes is checked, not an installed one.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
