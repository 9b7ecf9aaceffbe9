"""
==============================================
The latent space of a variational autoencoder
==============================================

:class:`~skbayes.VAE` is a scikit-learn transformer: ``transform`` encodes
rows into the mean of their posterior over a low-dimensional latent code,
``inverse_transform`` decodes latent codes back into data space, and
``sample`` draws new rows from the generative model. This example fits a
VAE with a two-dimensional latent space to the 8x8 digits of scikit-learn,
without the labels, and looks at what it learned.
"""

# %%
# Fit
# ---
# The grey levels 0-16 scaled to [0, 1] and modelled as Bernoulli
# probabilities, the usual choice for images; every other setting is the
# default (one hidden layer of 200 units, stopping when the loss settles).
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from skbayes import VAE

X, y = load_digits(return_X_y=True)
X = X / 16.0
vae = VAE(n_components=2, likelihood="bernoulli", random_state=0).fit(X)
print(f"{vae.n_iter_} epochs; evidence lower bound {vae.score(X):.2f} nats per image")

# %%
# The latent space, coloured by the labels the model never saw
# ---------------------------------------------------------------
# Each point is the posterior mean of one image; the prior over the codes is
# a standard normal. Digits of the same class gather, although the labels
# played no part in the fit.
Z = vae.transform(X)
fig, ax = plt.subplots(figsize=(5.5, 4.5))
points = ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=5)
fig.colorbar(points, ax=ax, ticks=range(10), label="digit")
ax.set(xlabel="z1", ylabel="z2", title="posterior means of the 1,797 images")

# %%
# Decoding a grid of latent codes
# -------------------------------
# ``inverse_transform`` maps every point of a regular grid of codes, spaced
# by the quantiles of the prior, to the image the decoder expects there:
# the digits morph into each other along the axes.
from scipy.stats import norm

ticks = norm.ppf(np.linspace(0.05, 0.95, 10))
grid = np.array([[z1, z2] for z2 in ticks[::-1] for z1 in ticks])
tiles = np.pad(vae.inverse_transform(grid).reshape(10, 10, 8, 8), [(0, 0), (0, 0), (1, 1), (1, 1)])
fig, ax = plt.subplots(figsize=(5, 5))
ax.imshow(tiles.transpose(0, 2, 1, 3).reshape(100, 100), cmap="gray_r")
ax.set(title="decoder means over the latent grid", xticks=[], yticks=[])

# %%
# Reconstructions and new samples
# -------------------------------
# Top: ten images; middle: their reconstructions through the two-number
# code; bottom: images generated from codes drawn from the prior.
reconstructions = vae.inverse_transform(vae.transform(X[:10]))
samples = vae.sample(10, random_state=0)
fig, axes = plt.subplots(3, 10, figsize=(8, 2.8))
for row, (images, label) in enumerate([(X[:10], "data"), (reconstructions, "reconstructed"),
                                       (samples, "sampled")]):
    for ax, image in zip(axes[row], images):
        ax.imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        ax.set(xticks=[], yticks=[])
    axes[row, 0].set_ylabel(label, fontsize=8)
fig.tight_layout()
plt.show()
