"""Zoo cases: torch.distributions."""

from __future__ import annotations

import torch
import torch.distributions as D

from .common import case

# ---------------------------------------------------------------- distributions


def log_prob(distribution):
    """f(*parameters, value): the log-density of value under distribution(*parameters)."""
    return lambda *a: distribution(*a[:-1]).log_prob(a[-1])


@case("distributions")
def normal_log_prob(c):
    return log_prob(D.Normal), (c.randn(4), c.rand(4, low=0.5, high=2), c.randn(4))


@case("distributions")
def normal_rsample_entropy(c):
    def f(loc, scale):
        d = D.Normal(loc, scale)
        return (
            d.rsample((3,)),
            d.entropy(),
            d.cdf(loc + 0.3),
            d.icdf(torch.full_like(loc, 0.2)),
        )

    return f, (c.randn(4), c.rand(4, low=0.5, high=2))


@case("distributions")
def categorical_log_prob(c):
    v = torch.tensor([0, 3, 2])
    return (lambda logits: D.Categorical(logits=logits).log_prob(v)), (c.randn(3, 4),)


@case("distributions")
def categorical_probs_entropy(c):
    def f(p):
        d = D.Categorical(probs=p)
        return d.log_prob(torch.tensor([1, 0])), d.entropy()

    return f, (c.rand(2, 4, low=0.2, high=1),)


@case("distributions")
def bernoulli_log_prob(c):
    v = torch.tensor([0.0, 1, 1]).to(c.dtype)
    return (lambda p: D.Bernoulli(probs=p).log_prob(v)), (c.rand(3, low=0.1, high=0.9),)


@case("distributions")
def bernoulli_logits_log_prob(c):
    v = torch.tensor([0.0, 1, 1]).to(c.dtype)
    return (lambda p: D.Bernoulli(logits=p).log_prob(v)), (c.randn(3),)


def _positive_pair_and_value(c, value_high):
    """Two positive parameters, then a positive value below value_high."""
    return (
        c.rand(3, low=0.5, high=3),
        c.rand(3, low=0.5, high=3),
        c.rand(3, low=0.1, high=value_high),
    )


@case("distributions")
def beta_log_prob(c):
    return log_prob(D.Beta), _positive_pair_and_value(c, 0.9)  # value in (0, 1)


@case("distributions")
def gamma_log_prob(c):
    return log_prob(D.Gamma), _positive_pair_and_value(c, 3)


@case("distributions")
def dirichlet_log_prob(c):
    # The value on the simplex (finite differences move it): a softmax.
    return (lambda a, z: D.Dirichlet(a).log_prob(z.softmax(-1))), (
        c.rand(2, 4, low=0.5, high=3),
        c.randn(2, 4),
    )


@case("distributions")
def mvn_log_prob(c):
    def f(loc, cov, x):
        cov = (cov + cov.mT) / 2  # a symmetric tangent
        return D.MultivariateNormal(loc, covariance_matrix=cov).log_prob(x)

    return f, (c.randn(3), c.spd(n=3), c.randn(2, 3))


@case("distributions")
def mvn_scale_tril_log_prob(c):
    def f(loc, a, x):
        tril = torch.tril(a, -1) + torch.diag_embed(a.diagonal(dim1=-2, dim2=-1).exp())
        return D.MultivariateNormal(loc, scale_tril=tril).log_prob(x)

    return f, (c.randn(2, 3), c.randn(3, 3), c.randn(2, 3))


@case("distributions")
def laplace_log_prob(c):
    return log_prob(D.Laplace), (c.randn(4), c.rand(4, low=0.5, high=2), c.randn(4))


@case("distributions")
def student_t_log_prob(c):
    return log_prob(D.StudentT), (
        c.rand(3, low=2, high=5),
        c.randn(3),
        c.rand(3, low=0.5, high=2),
        c.randn(3),
    )


@case("distributions")
def poisson_log_prob(c):
    v = torch.tensor([0.0, 2, 5]).to(c.dtype)
    return (lambda r: D.Poisson(r).log_prob(v)), (c.rand(3, low=0.5, high=4),)


@case("distributions")
def exponential_log_prob(c):
    return (lambda r, x: D.Exponential(r).log_prob(x)), (
        c.rand(3, low=0.5, high=2),
        c.rand(3, low=0.1, high=2),
    )


@case("distributions")
def uniform_log_prob_entropy(c):
    def f(lo, hi):
        d = D.Uniform(lo, hi)
        return d.log_prob(lo + 0.25 * (hi - lo)), d.entropy()

    return f, (c.randn(3), c.randn(3) + 3)


@case("distributions")
def log_normal_log_prob(c):
    return log_prob(D.LogNormal), (
        c.randn(3),
        c.rand(3, low=0.5, high=2),
        c.rand(3, low=0.5, high=2),
    )


@case("distributions")
def multinomial_log_prob(c):
    v = torch.tensor([[1.0, 2, 0, 3]]).to(c.dtype)
    return (lambda p: D.Multinomial(6, probs=p).log_prob(v)), (
        c.rand(1, 4, low=0.2, high=1),
    )


@case("distributions")
def von_mises_log_prob(c):
    return log_prob(D.VonMises), (c.randn(3), c.rand(3, low=0.5, high=3), c.randn(3))


@case("distributions")
def independent_normal_kl(c):
    def f(m1, s1, m2, s2):
        p = D.Independent(D.Normal(m1, s1), 1)
        q = D.Independent(D.Normal(m2, s2), 1)
        return D.kl_divergence(p, q)

    return f, (
        c.randn(2, 3),
        c.rand(2, 3, low=0.5, high=2),
        c.randn(2, 3),
        c.rand(2, 3, low=0.5, high=2),
    )
