"""Deep ensembles: the batched StackedMLP engine and inference="ensemble"."""

import numpy as np
import pytest
import torch

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import DeepEnsemble
from skbayes.inference._ensemble import member_losses, sum_gradient_mean_value
from skbayes.nn import GaussianLikelihood, StackedMLP

from _exact_blr import exact_blr_predictive, make_blr_data

# Short fits that stop at max_iter are the point of these fast tests.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _net(n_members=4, hidden=(7, 5), seed=0, **kw):
    g = torch.Generator().manual_seed(seed)
    return StackedMLP(3, hidden, 2, n_members=n_members, generator=g, dtype=torch.float64, **kw)


def _x(n=6, seed=1):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ------------------------------------------------------------------ StackedMLP
def test_each_member_is_an_ordinary_mlp():
    net, x = _net(activation="tanh"), _x()
    f = net(x)
    assert f.shape == (4, 6, 2)
    for m in range(4):
        h = x
        for i, layer in enumerate(net.layers):
            w = layer.weight[m]
            h = (torch.tanh(h) if i else h) @ w[:-1] + w[-1]
        torch.testing.assert_close(f[m], h)
    # the prediction path gives the same functions, all members in order
    torch.testing.assert_close(net.forward_with(x, net.member_parameters()), f)


def test_a_member_does_not_depend_on_the_other_members_weights():
    net, x = _net(), _x()
    f = net(x)
    f[0].sum().backward()
    for layer in net.layers:
        assert layer.weight.grad[1:].abs().max() == 0
        assert layer.weight.grad[0].abs().max() > 0
    with torch.no_grad():
        for layer in net.layers:
            layer.weight[1:] += 5.0
    torch.testing.assert_close(net(x)[0], f[0].detach())
    assert (net(x)[1:] - f[1:]).abs().min() > 0


def test_members_get_their_own_rows():
    net, x = _net(n_members=3), torch.randn(3, 6, 3, dtype=torch.float64)
    f = net(x)
    for m in range(3):
        torch.testing.assert_close(f[m], net.select(torch.tensor([m]))(x[m])[0])
    with pytest.raises(ValueError, match="x must have shape"):
        net(torch.randn(2, 6, 3, dtype=torch.float64))


def test_initialisation_is_independent_per_member_and_reproducible():
    a, b = _net(seed=0), _net(seed=0)
    for la, lb in zip(a.layers, b.layers):
        torch.testing.assert_close(la.weight, lb.weight)
        bound = 1 / np.sqrt(la.in_features)
        assert float(la.weight.detach().abs().max()) <= bound
        # no two members share their initial weights
        flat = la.weight.detach().reshape(la.n_members, -1)
        assert float(torch.cdist(flat, flat).add(torch.eye(la.n_members) * 1e9).min()) > 0.1
    assert not torch.equal(a.layers[0].weight, _net(seed=1).layers[0].weight)
    assert a.layers[0].in_features == 3 and a.layers[-1].out_features == 2


def test_sample_parameters_draws_members_uniformly_with_replacement():
    net = _net(n_members=4, hidden=())
    weight, bias = net.sample_parameters(4000, generator=torch.Generator().manual_seed(0))[0]
    members = net.layers[0].weight[:, :-1]
    match = (weight[:, None] == members[None]).flatten(2).all(-1)  # (4000, 4)
    assert bool((match.sum(1) == 1).all())  # every draw is exactly one member
    freq = match.double().mean(0)
    torch.testing.assert_close(freq, torch.full((4,), 0.25, dtype=torch.float64), atol=0.03, rtol=0)
    torch.testing.assert_close(bias, net.layers[0].weight[match.double().argmax(1), -1:])


def test_kl_is_the_negative_log_gaussian_prior():
    net = _net(prior_scale=0.5)
    sq = [float((layer.weight.detach() ** 2).sum(dim=(1, 2))[m]) for layer in net.layers for m in range(4)]
    assert float(net.neg_log_prior().detach()) == pytest.approx(sum(sq) / (2 * 0.25))
    per_member = [sum(float((layer.weight.detach()[m] ** 2).sum()) for layer in net.layers) / 0.5 for m in range(4)]
    np.testing.assert_allclose(net.member_neg_log_prior().detach().numpy(), per_member)


def test_joint_loss_gives_each_member_the_gradient_of_its_own_loss():
    net, x = _net(n_members=3), torch.randn(3, 6, 3, dtype=torch.float64)
    y = torch.randn(3, 6, 2, dtype=torch.float64)
    module = torch.nn.ModuleDict(
        {"network": net, "likelihood": GaussianLikelihood(2, 0.5, n_members=3, dtype=torch.float64)}
    )
    losses = member_losses(module, x, y, n_data=100)
    joint = sum_gradient_mean_value(losses)
    assert float(joint.detach()) == pytest.approx(float(losses.detach().mean()))
    joint.backward()
    grads = [p.grad.clone() for p in module.parameters()]
    for m in range(3):
        module.zero_grad()
        member_losses(module, x, y, n_data=100)[m].backward()
        for p, g in zip(module.parameters(), grads):
            torch.testing.assert_close(p.grad[m], g[m])


# --------------------------------------------------------------- the estimator
def _sine(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, (n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(n)


@pytest.fixture(scope="module")
def sine_ensemble():
    X, y = _sine(200, 0)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(16,),
        inference=DeepEnsemble(n_estimators=4, learning_rate_init=0.01, max_iter=150),
        random_state=0, noise="homoscedastic",
    )
    return model.fit(X, y), X, y


def test_predictive_is_the_uniform_mixture_of_the_members(sine_ensemble):
    model, X, _ = sine_ensemble
    Xt = np.linspace(-3, 3, 7)[:, None]
    network = model.module_["network"]
    with torch.no_grad():
        f = network(torch.tensor(Xt, dtype=torch.float64))[..., 0].numpy() * model._y_scale + model._y_mean
    sigma = model.module_["likelihood"].noise_std.detach().numpy().ravel() * model._y_scale
    parts = model.predict_uncertainty(Xt)
    np.testing.assert_allclose(parts.mean, f.mean(0), rtol=1e-10)
    np.testing.assert_allclose(parts.epistemic_std**2, f.var(0), rtol=1e-8)  # spread of the member means
    np.testing.assert_allclose(parts.aleatoric_std**2, np.mean(sigma**2), rtol=1e-8)  # mean noise variance
    # the mixture's variance from its moments, member by member:
    # E[y^2] - E[y]^2 with E[y^2] = mean_m (f_m^2 + sigma_m^2)
    second_moment = np.mean(f**2 + sigma[:, None] ** 2, axis=0)
    np.testing.assert_allclose(parts.std**2, second_moment - f.mean(0) ** 2, rtol=1e-8)
    # and by brute force: 40,000 draws of y, each from a random member with its own noise
    samples = model.sample_y(Xt, n_samples=40_000, random_state=0)
    np.testing.assert_allclose(samples.mean(1), parts.mean, atol=0.05 * parts.std.min())
    np.testing.assert_allclose(samples.std(1), parts.std, rtol=0.03)
    # the exact mixture density, member by member with its own noise
    y = np.sin(2 * Xt[:, 0])
    dens = np.exp(-0.5 * ((y - f) / sigma[:, None]) ** 2) / (np.sqrt(2 * np.pi) * sigma[:, None])
    np.testing.assert_allclose(model.log_predictive_density(Xt, y), np.log(dens.mean(0)), rtol=1e-8)


def test_each_member_learns_its_own_noise(sine_ensemble):
    model, _, _ = sine_ensemble
    sigma = model.module_["likelihood"].noise_std.detach().numpy().ravel() * model._y_scale
    assert sigma.shape == (4,)
    assert np.ptp(sigma) > 1e-4  # not tied
    np.testing.assert_allclose(sigma, 0.2, rtol=0.3)  # each near the true noise
    assert model.noise_std_[0] == pytest.approx(np.sqrt(np.mean(sigma**2)))


def test_epistemic_uncertainty_grows_away_from_the_data(sine_ensemble):
    model, _, _ = sine_ensemble
    inside = model.predict_uncertainty(np.linspace(-1.5, 1.5, 20)[:, None]).epistemic_std.mean()
    outside = model.predict_uncertainty(np.array([[-5.0], [5.0]])).epistemic_std.mean()
    assert outside > 5 * inside


def test_same_random_state_gives_identical_ensembles():
    X, y = _sine(60, 1)
    kw = dict(hidden_layer_sizes=(8,), inference=DeepEnsemble(n_estimators=3, max_iter=5), noise="homoscedastic")
    fits = [BayesianMLPRegressor(random_state=s, **kw).fit(X, y) for s in (0, 0, 1)]
    a, b, c = (m.predict(X, return_std=True)[1] for m in fits)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_ensemble_of_linear_models_finds_the_posterior_mean_but_no_spread():
    # With no hidden layer every member minimises the same strictly convex MAP
    # loss, whose minimiser is the exact posterior mean of Bayesian linear
    # regression; full-batch Adam takes all members there, so they agree and
    # the ensemble has no epistemic variance: the method's known bias on a
    # unimodal posterior, not a numerical error.
    X, y, Xt = make_blr_data(n_samples=100)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        inference=DeepEnsemble(learning_rate_init=0.05, max_iter=300, n_iter_no_change=300),
        noise_std=0.3,
        normalize_y=False,
        batch_size=100,
        random_state=0, noise="homoscedastic",
    ).fit(X, y)
    mean, epistemic = exact_blr_predictive(X, y, Xt, 1.0, 0.3)[::2]
    parts = model.predict_uncertainty(Xt)
    np.testing.assert_allclose(parts.mean, mean, atol=1e-4)
    assert parts.epistemic_std.max() < 0.01 * epistemic.min()
    np.testing.assert_allclose(parts.aleatoric_std, 0.3)


def test_classifier_ensemble_averages_member_probabilities():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(-1.5, 1, (60, 2)), rng.normal(1.5, 1, (60, 2))])
    y = np.repeat([0, 1], 60)
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(8,), inference=DeepEnsemble(n_estimators=3, max_iter=60), random_state=0
    )
    clf.fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (120, 2)
    np.testing.assert_allclose(proba.sum(1), 1)
    assert clf.score(X, y) > 0.85
    with torch.no_grad():
        logits = clf.module_["network"](torch.tensor(X, dtype=torch.float64))
    np.testing.assert_allclose(proba, torch.softmax(logits, -1).mean(0).numpy(), rtol=1e-8)
