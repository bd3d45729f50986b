"""L_TS against hand-computed values, and training on a series with learnable structure reaches
close to the oracle NLL."""

import math

import torch

from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.loss import pinball, ts_loss
from ts_encoder.model import TSEncoder, TSOutput


def _out(mu: torch.Tensor, sigma: torch.Tensor, qh: torch.Tensor, ql: torch.Tensor) -> TSOutput:
    b = mu.shape[0]
    return TSOutput(mu=mu, sigma=sigma, q_high=qh, q_low=ql, hidden=torch.zeros(b, 1, 1),
                    h_ts=torch.zeros(b, 1, 1), state=torch.zeros(b, 1))


def test_pinball_hand_values() -> None:
    u = torch.tensor([2.0, -2.0, 0.0])
    torch.testing.assert_close(pinball(u, 0.95), torch.tensor([1.9, 0.1, 0.0]))
    torch.testing.assert_close(pinball(u, 0.05), torch.tensor([0.1, 1.9, 0.0]))


def test_ts_loss_hand_computed() -> None:
    # B=1, S=2; channels (O, H, L, C, V)
    y = torch.tensor([[[0.1, 0.0], [0.3, 0.2], [-0.1, -0.4], [0.2, -0.2], [1.0, 0.0]]])
    mu = torch.tensor([[[0.0, 0.0], [0.2, 0.0], [0.5, 0.5]]])  # O, C, V
    sigma = torch.tensor([[[1.0, 2.0], [0.5, 0.5], [1.0, 1.0]]])
    qh, ql = torch.tensor([[0.1, 0.3]]), torch.tensor([[-0.2, -0.3]])
    w = LossWeights(open=1.0, close=2.0, volume=0.5, high=3.0, low=1.0)
    loss, parts = ts_loss(_out(mu, sigma, qh, ql), y, w)

    def nll(r: float, m: float, s: float) -> float:
        return (r - m) ** 2 / (2 * s * s) + 0.5 * math.log(s * s)

    n_o = nll(0.1, 0, 1) + nll(0.0, 0, 2)
    n_c = nll(0.2, 0.2, 0.5) + nll(-0.2, 0.0, 0.5)
    n_v = nll(1.0, 0.5, 1) + nll(0.0, 0.5, 1)
    p_h = 0.2 * 0.95 + 0.1 * 0.05  # u = 0.3-0.1 = 0.2 > 0 ; u = 0.2-0.3 = -0.1 < 0
    p_l = 0.1 * 0.05 + 0.1 * 0.95  # u = -0.1+0.2 = 0.1 ; u = -0.4+0.3 = -0.1
    for name, val in (("nll_open", n_o), ("nll_close", n_c), ("nll_volume", n_v),
                      ("pinball_high", p_h), ("pinball_low", p_l)):
        assert math.isclose(parts[name].item(), val, rel_tol=1e-5), name
    expected = n_o + 2 * n_c + 0.5 * n_v + 3 * p_h + p_l
    assert math.isclose(loss.item(), expected, rel_tol=1e-5)


def test_close_crps_term_is_the_gaussian_crps_of_the_cumulative_close() -> None:
    """Same numbers as above: cumulative close y = (0.2, 0.0), m = (0.2, 0.2), sd = (0.5, 0.5·√2).
    CRPS(N(0, 1), 0) = 2φ(0) - 1/√π = 0.233695; at h = 2, z = -0.2 / 0.7071 = -0.282843."""
    from ts_encoder.loss import gaussian_crps

    y = torch.tensor([[[0.1, 0.0], [0.3, 0.2], [-0.1, -0.4], [0.2, -0.2], [1.0, 0.0]]])
    mu = torch.tensor([[[0.0, 0.0], [0.2, 0.0], [0.5, 0.5]]])
    sigma = torch.tensor([[[1.0, 2.0], [0.5, 0.5], [1.0, 1.0]]])
    qh, ql = torch.tensor([[0.1, 0.3]]), torch.tensor([[-0.2, -0.3]])
    out = _out(mu, sigma, qh, ql)
    base, parts0 = ts_loss(out, y, LossWeights())
    assert "crps_close" not in parts0  # default: the paper's L_TS, unchanged
    loss, parts = ts_loss(out, y, LossWeights(close_crps=10.0))
    z = -0.2 / (0.5 * math.sqrt(2))
    phi, cdf = math.exp(-z * z / 2) / math.sqrt(2 * math.pi), 0.5 * (1 + math.erf(z / math.sqrt(2)))
    c2 = 0.5 * math.sqrt(2) * (z * (2 * cdf - 1) + 2 * phi - 1 / math.sqrt(math.pi))
    assert math.isclose(parts["crps_close"].item(), 0.5 * 0.2336950 + c2, rel_tol=1e-5)
    assert math.isclose(loss.item(), base.item() + 10 * parts["crps_close"].item(), rel_tol=1e-5)
    # and it is the sample CRPS E|X - y| - ½E|X - X'| in the limit
    g = torch.Generator().manual_seed(0)
    x = 0.3 + 1.5 * torch.randn(400_000, generator=g, dtype=torch.float64)
    mc = (x - 1.0).abs().mean() - 0.5 * (x - x[torch.randperm(len(x), generator=g)]).abs().mean()
    ref = gaussian_crps(torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64),
                        torch.tensor(1.5, dtype=torch.float64))
    assert abs(mc.item() - ref.item()) < 5e-3


def _structured(n: int, gen: torch.Generator, lookback: int = 30, horizon: int = 2):
    """Inputs iid N(0,1); close return μ = 0.8 x_C[-1], σ_C = 0.6 exp(0.5 x_O[-1]); O, V: N(0, 1);
    H = C + |e|, L = C - |e'|. Returns x, y, oracle (μ_C, σ_C)."""
    x = torch.randn(n, 5, lookback, generator=gen)
    mu_c = 0.8 * x[:, 3, -1:].expand(n, horizon)
    sd_c = (0.6 * torch.exp(0.5 * x[:, 0, -1:])).expand(n, horizon)
    y = torch.randn(n, 5, horizon, generator=gen)
    y[:, 3] = mu_c + sd_c * y[:, 3]
    y[:, 1] = y[:, 3] + y[:, 1].abs()
    y[:, 2] = y[:, 3] - y[:, 2].abs()
    return x, y, mu_c, sd_c


def test_training_reaches_near_oracle_nll() -> None:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    cfg = TSEncoderConfig(lookback=30, horizon=2, d_model=32, n_layers=1, n_heads=2, ffn_dim=64,
                          d_llm=8, dropout=0.0)
    model = TSEncoder(cfg)
    x, y, _, _ = _structured(4096, gen)
    xv, yv, mu_v, sd_v = _structured(2048, gen)
    steps = 300
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)

    def val_close_nll() -> float:
        model.eval()
        with torch.no_grad():
            _, parts = ts_loss(model(xv), yv)
        model.train()
        return parts["nll_close"].item()

    start = val_close_nll()
    for _step in range(steps):
        idx = torch.randint(0, 4096, (128,), generator=gen)
        loss, _ = ts_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    end = val_close_nll()
    oracle = (((yv[:, 3] - mu_v) ** 2 / (2 * sd_v**2)) + sd_v.log()).sum(-1).mean().item()
    naive = ((yv[:, 3] - yv[:, 3].mean()) ** 2 / (2 * yv[:, 3].var()) + 0.5 * yv[:, 3].var().log()).sum(-1).mean()
    assert end < start - 0.5, (start, end)
    # the unconditional Gaussian is ~1.2 nats above the oracle here; we must close > 80% of that gap
    assert naive.item() - oracle > 0.8
    assert end - oracle < 0.2 * (naive.item() - oracle), (end, oracle, naive.item())
